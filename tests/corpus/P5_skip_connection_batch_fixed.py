# pkb-corpus
# family: P5
# title: stage 2 puts the gradient send for stage 1 into the same batch as its forward receives, so the batch can complete
# patterns: batch_isend_irecv, send, recv
# world_sizes: 4, 8
# expect: ok
# twin: P5_skip_connection_batch_bug.py
# source: pytorch/PiPPy#969
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    stage, world = dist.get_rank(), dist.get_world_size()
    n = 1024
    act = torch.full((n,), float(stage), device="cuda")
    grad = torch.full((n,), 100.0 + stage, device="cuda")
    if stage == 0:
        ops = [dist.P2POp(dist.isend, act, 1), dist.P2POp(dist.isend, act, 2)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    elif stage == 1:
        x, g = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
        dist.recv(x, 0)
        dist.recv(g, 2)
        assert torch.equal(g, torch.full((n,), 102.0, device="cuda"))
        dist.send(x + 1, 2)
    elif stage == 2:
        skip, x = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
        ops = [dist.P2POp(dist.irecv, skip, 0), dist.P2POp(dist.irecv, x, 1),
               dist.P2POp(dist.isend, grad, 1)]  # FIX: the gradient goes out with the receives
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        assert torch.equal(x + skip, torch.full((n,), 1.0, device="cuda"))
        if world > 3:
            dist.send(x + skip, 3)
    else:
        x = torch.empty(n, device="cuda")
        dist.recv(x, stage - 1)
        assert torch.equal(x, torch.full((n,), float(stage - 2), device="cuda"))
        if stage < world - 1:
            dist.send(x + 1, stage + 1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

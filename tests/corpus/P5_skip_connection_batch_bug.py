# pkb-corpus
# family: P5
# title: stage 2 batches its two forward receives (skip connection from stage 0 and input from stage 1) and waits for the batch before sending the gradient stage 1 needs before it can send
# patterns: batch_isend_irecv, send, recv
# world_sizes: 4, 8
# expect: deadlock
# twin: P5_skip_connection_batch_fixed.py
# source: pytorch/PiPPy#969
# bug_line: 39
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
    if stage == 0:  # feeds stage 1 and, through the skip connection, stage 2
        ops = [dist.P2POp(dist.isend, act, 1), dist.P2POp(dist.isend, act, 2)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
    elif stage == 1:  # 1F1B steady state: receive the previous micro-batch's gradient before sending forward
        x, g = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
        dist.recv(x, 0)
        dist.recv(g, 2)
        dist.send(x + 1, 2)
    elif stage == 2:
        skip, x = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
        ops = [dist.P2POp(dist.irecv, skip, 0), dist.P2POp(dist.irecv, x, 1)]
        for w in dist.batch_isend_irecv(ops):  # BUG: the batch needs stage 1's send, which needs our gradient
            w.wait()
        dist.send(grad, 1)
        if world > 3:
            dist.send(x + skip, 3)
    else:
        x = torch.empty(n, device="cuda")
        dist.recv(x, stage - 1)
        if stage < world - 1:
            dist.send(x + 1, stage + 1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

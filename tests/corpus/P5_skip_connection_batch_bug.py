# pkb-corpus
# family: P5
# title: pipeline with a skip connection 0->2; stage 2 batches both receives, stage 0 batches both sends
# patterns: batch_isend_irecv, isend, irecv
# world_sizes: 4, 8
# expect: deadlock
# twin: P5_skip_connection_batch_fixed.py
# source: pytorch/PiPPy#969
# bug_line: 33
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    stage = dist.get_rank()
    world = dist.get_world_size()

    n = 1024
    # stage i feeds stage i + 1; stage 0 also feeds stage 2 directly (skip connection)
    recv_from = {0: [], 2: [0, 1]}.get(stage, [stage - 1])
    send_to = {0: [1, 2]}.get(stage, [stage + 1] if stage < world - 1 else [])

    inputs = [torch.empty(n, device="cuda") for _ in recv_from]
    if inputs:
        # BUG: one batch across peers: stage 2's group also waits for stage 1, which sends only
        # after its own compute, which needs stage 0's batch, which includes the send to stage 2
        ops = [dist.P2POp(dist.irecv, t, src) for t, src in zip(inputs, recv_from)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
    out = sum(inputs) + 1 if inputs else torch.ones(n, device="cuda")  # the stage's compute
    if send_to:
        ops = [dist.P2POp(dist.isend, out, dst) for dst in send_to]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    print(f"stage {stage}: out[0] = {out[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

# pkb-corpus
# family: P5
# title: pipeline with a skip connection 0->2; P2P ops batched per peer, peers in sorted order
# patterns: batch_isend_irecv, isend, irecv
# world_sizes: 4, 8
# expect: ok
# twin: P5_skip_connection_batch_bug.py
# source: pytorch/PiPPy#969
import os

import torch
import torch.distributed as dist


def batch_per_peer(ops):
    # FIX (PiPPy#1000): one batch_isend_irecv per peer instead of one batch across peers
    for peer in sorted({op.peer for op in ops}):
        for work in dist.batch_isend_irecv([op for op in ops if op.peer == peer]):
            work.wait()


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
        batch_per_peer([dist.P2POp(dist.irecv, t, src) for t, src in zip(inputs, recv_from)])
    out = sum(inputs) + 1 if inputs else torch.ones(n, device="cuda")  # the stage's compute
    if send_to:
        batch_per_peer([dist.P2POp(dist.isend, out, dst) for dst in send_to])

    # stage 0: 1, stage 1: 2, stage 2: 1 + 2 + 1 = 4, then +1 per stage
    expected = {0: 1.0, 1: 2.0}.get(stage, 2.0 + stage)
    assert torch.equal(out, torch.full((n,), expected, device="cuda")), out[0]
    print(f"stage {stage}: out[0] = {out[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

# pkb-corpus
# family: P4
# title: 1F1B steady state with Megatron's even/odd ordering of sends and receives
# patterns: send, recv
# world_sizes: 2, 4
# expect: ok
# twin: P4_pipeline_send_first_bug.py
# source: pytorch/pytorch#172668
import os

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    stage = dist.get_rank()
    world = dist.get_world_size()
    first, last = stage == 0, stage == world - 1

    n = 4 * 1024 * 1024  # 16 MiB activations and gradients
    act_out = torch.full((n,), float(stage), device="cuda")
    grad_out = torch.full((n,), float(-stage), device="cuda")
    act_in = torch.empty(n, device="cuda")
    grad_in = torch.empty(n, device="cuda")

    send_next = (lambda: dist.send(act_out, dst=stage + 1)) if not last else (lambda: None)
    send_prev = (lambda: dist.send(grad_out, dst=stage - 1)) if not first else (lambda: None)
    recv_prev = (lambda: dist.recv(act_in, src=stage - 1)) if not first else (lambda: None)
    recv_next = (lambda: dist.recv(grad_in, src=stage + 1)) if not last else (lambda: None)
    # FIX: even stages send first, odd stages receive first (Megatron's _p2p_ops order)
    if stage % 2 == 0:
        order = [send_next, recv_prev, send_prev, recv_next]
    else:
        order = [recv_prev, send_next, recv_next, send_prev]
    for op in order:
        op()

    if not first:
        assert torch.equal(act_in[:16], torch.full((16,), float(stage - 1), device="cuda"))
    if not last:
        assert torch.equal(grad_in[:16], torch.full((16,), float(-(stage + 1)), device="cuda"))
    print(f"stage {stage}: step done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

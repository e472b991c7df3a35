# pkb-corpus
# family: P4
# title: 1F1B steady state where every stage sends (activation and gradient) before receiving
# patterns: send, recv
# world_sizes: 2, 4
# expect: deadlock
# twin: P4_pipeline_send_first_fixed.py
# source: pytorch/pytorch#172668
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
    first, last = stage == 0, stage == world - 1

    n = 4 * 1024 * 1024  # 16 MiB activations and gradients
    act_out = torch.full((n,), float(stage), device="cuda")
    grad_out = torch.full((n,), float(-stage), device="cuda")
    act_in = torch.empty(n, device="cuda")
    grad_in = torch.empty(n, device="cuda")

    # BUG: send_forward, send_backward, then recv_forward, recv_backward on every stage:
    # neighbouring stages both block in send, each waiting for the other's recv
    if not last:
        dist.send(act_out, dst=stage + 1)
    if not first:
        dist.send(grad_out, dst=stage - 1)
    if not first:
        dist.recv(act_in, src=stage - 1)
    if not last:
        dist.recv(grad_in, src=stage + 1)

    print(f"stage {stage}: step done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

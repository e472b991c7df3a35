"""DDP training on each rank's own data, on GPUs (--backend nccl) or the CPU (--backend gloo); every rank
prints a checksum of the trained weights and the evaluation loss averaged over the ranks.

    torchrun --nproc-per-node 2 ddp_backend.py [--backend nccl|gloo] [--steps N] [--rank0-evaluates]

--rank0-evaluates is the deadlocking twin: only rank 0 averages the evaluation loss (an all_reduce no other
rank joins) before it prints.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rank0-evaluates", action="store_true")
    args = ap.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    if args.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)  # each rank trains on its own samples
    for _ in range(args.steps):
        x = torch.randn(32, 8, generator=data).to(device)
        loss = nn.functional.mse_loss(ddp(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()

    with torch.no_grad():
        x = torch.randn(64, 8, generator=data).to(device)
        eval_loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True)).reshape(1)
    if not args.rank0_evaluates or rank == 0:
        dist.all_reduce(eval_loss)
        eval_loss /= world
    checksum = sum(p.detach().double().sum() for p in model.parameters()).item()
    print(f"rank {rank}: weights {checksum:.5f} eval loss {eval_loss.item():.5f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

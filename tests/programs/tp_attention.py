"""Tensor-parallel attention with F.scaled_dot_product_attention on DTensors, checked against the same
module unsharded: q/k/v projections column-parallel (heads sharded), the output projection row-parallel.

    torchrun --nproc-per-node 2 tp_attention.py [--backend nccl|gloo] [--rank0-checks-grads]

--backend nccl puts the mesh on "cuda", gloo on "cpu" (where DTensor has no strategy for the CPU flash
attention kernel: torch raises NotImplementedError). --rank0-checks-grads is the deadlocking twin: only
rank 0 gathers the sharded gradients to compare them, so it waits in an all-gather that no other rank joins.
"""
import argparse
import copy
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class Attention(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 4):
        super().__init__()
        self.head_dim = dim // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))

    def forward(self, x):
        b, t, _ = x.shape
        # -1 heads: each rank holds its own heads once the projections are sharded
        q, k, v = (w(x).view(b, t, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, t, -1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    ap.add_argument("--rank0-checks-grads", action="store_true")
    args = ap.parse_args()
    device = "cuda" if args.backend == "nccl" else "cpu"
    world = int(os.environ["WORLD_SIZE"])
    mesh = init_device_mesh(device, (world,))
    rank = dist.get_rank()

    torch.manual_seed(0)
    plain = Attention()
    x = torch.randn(2, 5, 16)
    ref = plain(x)
    ref.sum().backward()

    tp = parallelize_module(copy.deepcopy(plain).to(device), mesh, {
        "wq": ColwiseParallel(use_local_output=False), "wk": ColwiseParallel(use_local_output=False),
        "wv": ColwiseParallel(use_local_output=False), "wo": RowwiseParallel()})
    tp.zero_grad()
    out = tp(x.to(device))
    out.sum().backward()
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    if not args.rank0_checks_grads or rank == 0:
        for name in ("wq", "wk", "wv", "wo"):
            got = getattr(tp, name).weight.grad.full_tensor().cpu()
            torch.testing.assert_close(got, getattr(plain, name).weight.grad, rtol=1e-5, atol=1e-5)
    print(f"rank {rank}: tp attention matches, output sum {ref.sum().item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

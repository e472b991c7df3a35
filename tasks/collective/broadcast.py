"""Broadcast from rank 0, out of place: every rank returns rank 0's tensor.

This is the initial parameter and buffer synchronisation of data-parallel training (PyTorch DDP's
constructor broadcasts rank 0's state; FSDP's sync_module_states). Only rank 0's input determines the
output; the other ranks' inputs are random so that returning them (skipping the broadcast) fails. The
collective only moves data, so the comparison is exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "broadcast"
ID = 5
TITLE = "Broadcast from rank 0, out of place"
CATEGORY = "collective"
ORIGIN = "NCCL ncclBroadcast / torch.distributed.broadcast (DDP initial state sync, FSDP sync_module_states)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"n": 4096}, "full": {"n": 64 * 2**20}}  # full: 256 MiB of fp32
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: (size["n"],))]
ROOT = 0


def make_inputs(ctx):
    return (ctx.randn(ctx.size["n"]),)


def reference(x):
    out = x.clone()
    dist.broadcast(out, src=ROOT)
    return out


def speed_of_light(size, world_size):
    # pipelined (ring/tree) broadcast: every non-root rank receives the tensor once
    return {"link_bytes_per_rank": size["n"] * 4, "flops": 0}

"""Ring shift with point-to-point send/recv: every rank returns the tensor of the previous rank.

Rank r sends its tensor to rank r+1 and receives rank r-1's (mod world_size), in one batched
send/receive group. This is the key/value rotation of ring attention (context parallelism: zhuzilin's
ring-flash-attention `RingComm`, Megatron-LM/TransformerEngine context parallel, torch's
`_RingRotater`), and the neighbour exchange of OpenCLIP's SigLIP distributed loss. The operation only
moves data, so the comparison is exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "ring_shift"
ID = 11
TITLE = "Ring shift to the next rank (batched isend/irecv)"
CATEGORY = "collective"
ORIGIN = "ring attention KV rotation (ring-flash-attention RingComm, batch_isend_irecv)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {"screen": {"m": 32, "n": 128},
         "full": {"m": 8192, "n": 4096}}  # full: 128 MiB of fp32 per rank
OUTPUTS = [Output("out", torch.float32, rtol=0.0, atol=0.0,  # data movement only: bit-exact
                  shape=lambda size, world_size, rank: (size["m"], size["n"]))]


def make_inputs(ctx):
    return (ctx.randn(ctx.size["m"], ctx.size["n"]),)


def reference(x):
    rank, ws = dist.get_rank(), dist.get_world_size()
    out = torch.empty_like(x)
    ops = [dist.P2POp(dist.isend, x, (rank + 1) % ws), dist.P2POp(dist.irecv, out, (rank - 1) % ws)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return out


def speed_of_light(size, world_size):
    return {"link_bytes_per_rank": size["m"] * size["n"] * 4, "flops": 0}

"""Quantised gradient all-reduce: int8 blocks with shared per-block scales, reduced exactly in integers
(DeepSpeed ZeRO++ qgZ-style all-to-all reduction; shared scales as in THC homomorphic compression).

ZeRO++'s quantised gradients (qgZ) replace the fp reduce-scatter of gradients by an all-to-all of int8
blocks with per-block scales, reduce locally and gather. Here the scales are agreed first (an all-reduce
MAX of the per-block absolute maxima), so every rank quantises a block with the same scale and the
reduction is an exact integer sum: the result is deterministic regardless of reduction order.

The exact algorithm (blocks of 128 consecutive elements; gradients are fp32):

    amax   = all_reduce_max(max |g| over each block)                    # shared by all ranks
    scale  = where(amax > 0, amax / 127, 1)                             # fp32
    q      = clamp(round(g / scale), -127, 127)                         # int8; IEEE division, round half to even
    qsum   = sum over ranks of q                                        # exact (int32; |qsum| <= 127 * ws)
    out    = qsum.float() * scale                                       # one fp32 multiply per element

The reference moves int8 in an all-to-all (rank r receives every rank's int8 of shard r and sums it) and
int16 in an all-gather of the shard sums. Any communication scheme is allowed if the result is this.

Inputs per rank: grad (numel,) fp32.
Output: out (numel,) fp32, identical on all ranks (the quantised sum, fp32 default tolerance: a single
off-by-one quantum fails).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "int8_quantized_grad_allreduce"
ID = 29
TITLE = "Int8 block-quantised gradient all-reduce with shared scales (exact integer reduction)"
CATEGORY = "fused"
ORIGIN = ("DeepSpeed ZeRO++ quantized gradients (qgZ, all-to-all reduction); "
          "THC-style shared-scale homomorphic compression")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)
BLOCK = 128
SIZES = {"screen": {"numel": 8192}, "full": {"numel": 64 * 2**20}}  # full: a 256 MiB fp32 gradient bucket
OUTPUTS = [Output("out", torch.float32, shape=lambda s, ws, r: (s["numel"],))]


def make_inputs(ctx):
    n = ctx.size["numel"]
    # gradients whose magnitude varies from block to block (per-layer scales) and between ranks
    block_scale = 10.0 ** (-3.0 + 2.0 * ctx.rand(n // 128, 1, shared=True))
    g = ctx.randn(n // 128, 128) * block_scale * (0.5 + ctx.rand(1))
    return (g.reshape(n),)


def reference(grad):
    ws = dist.get_world_size()
    blocks = grad.reshape(-1, 128)
    amax = blocks.abs().amax(-1)
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(blocks / scale[:, None]).clamp(-127, 127).to(torch.int8)
    recv = torch.empty_like(q).reshape(ws, -1, 128)
    dist.all_to_all_single(recv, q)                           # rank r gets every rank's blocks of shard r
    shard_sum = recv.sum(0, dtype=torch.int32).to(torch.int16)
    qsum = torch.empty(ws * shard_sum.shape[0], 256, dtype=torch.uint8, device=grad.device)
    dist.all_gather_into_tensor(qsum, shard_sum.view(torch.uint8))  # as bytes: NCCL has no int16 type
    return (qsum.view(torch.int16).float() * scale[:, None]).reshape(-1)


def speed_of_light(size, world_size):
    n = size["numel"]
    frac = (world_size - 1) / world_size
    return {"link_bytes_per_rank": frac * (n * 1 + n * 2) + 2 * frac * n // 128 * 4,
            "flops": 4 * n}  # per rank

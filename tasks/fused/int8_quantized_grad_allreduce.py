"""Quantised gradient all-reduce: int8 blocks with shared power-of-two scales, reduced exactly in integers
(DeepSpeed ZeRO++ qgZ-style all-to-all reduction; MX-style shared E8M0 block exponents).

ZeRO++'s quantised gradients (qgZ) replace the fp reduce-scatter of gradients by an all-to-all of int8
blocks with per-block scales, reduce locally and gather. Here the block scales are agreed first (an
all-reduce MAX of the per-block absolute maxima) and rounded up to powers of two (like the shared E8M0
exponent of the OCP microscaling formats), so every rank quantises a block with the same scale,
quantisation is exact arithmetic, and the reduction is an exact integer sum: the result is the same bit
for bit whatever the reduction order or division routine.

The exact algorithm (blocks of 128 consecutive elements; gradients are fp32):

    amax     = all_reduce_max(max |g| over each block)            # shared by all ranks
    exponent = the smallest e with amax / 2^e <= 127
               i.e. with amax = m * 2^k, m in [0.5, 1): e = k - 7 if m <= 127/128 else k - 6
    q        = round(g / 2^e)                                     # int8, |q| <= 127, round half to even
    qsum     = sum over ranks of q                                # exact, int32 (|qsum| <= 127 * ws)
    gradient = qsum * 2^exponent                                  (the dequantised all-reduced gradient)

The reference moves int8 in an all-to-all (rank r receives every rank's blocks of shard r and sums them)
and the int16 shard sums in an all-gather; any scheme that yields the same integers is fine.

Inputs per rank: grad (numel,) fp32.
Outputs: qsum (numel,) int32 and exponent (numel/128,) int32, identical on all ranks, compared exactly
(the quantised gradient; dequantising it is one multiply).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "int8_quantized_grad_allreduce"
ID = 29
TITLE = "Int8 block-quantised gradient all-reduce with shared power-of-two scales (exact integer reduction)"
CATEGORY = "fused"
ORIGIN = ("DeepSpeed ZeRO++ quantized gradients (qgZ, all-to-all reduction); "
          "shared-scale (MX E8M0-style) block quantisation")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)
BLOCK = 128
SIZES = {"screen": {"numel": 8192}, "full": {"numel": 64 * 2**20}}  # full: a 256 MiB fp32 gradient bucket
OUTPUTS = [Output("qsum", torch.int32, shape=lambda s, ws, r: (s["numel"],)),
           Output("exponent", torch.int32, shape=lambda s, ws, r: (s["numel"] // 128,))]


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
    m, k = torch.frexp(amax)
    exponent = (k - 7 + (m > 127 / 128).to(k.dtype)).to(torch.int32)
    scale = (exponent + 127).bitwise_left_shift(23).view(torch.float32)    # exactly 2^exponent
    q = torch.round(blocks / scale[:, None]).to(torch.int8)
    recv = torch.empty_like(q).reshape(ws, -1, 128)
    dist.all_to_all_single(recv, q)                                          # shard r of every rank
    shard_sum = recv.sum(0, dtype=torch.int32).to(torch.int16)
    qsum = torch.empty(ws * shard_sum.shape[0], 256, dtype=torch.uint8, device=grad.device)
    dist.all_gather_into_tensor(qsum, shard_sum.view(torch.uint8))          # as bytes: NCCL has no int16
    return qsum.view(torch.int16).reshape(-1).to(torch.int32), exponent


def speed_of_light(size, world_size):
    n = size["numel"]
    frac = (world_size - 1) / world_size
    return {"link_bytes_per_rank": frac * (n * 1 + n * 2) + 2 * frac * n // 128 * 4,
            "flops": 4 * n}  # per rank

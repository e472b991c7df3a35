"""FP8 block quantisation + all-gather: DeepSeek-style 1x128 activation quantisation with power-of-two
(UE8M0) scales, communicated in FP8 (TransformerEngine Float8BlockQuantizer all-gather for sequence
parallelism).

FP8 training with fine-grained scaling (DeepSeek-V3; TE's Float8BlockScaling recipe) quantises
activations per token and per 128 channels. Under sequence/tensor parallelism the all-gather before the
column-parallel FP8 GEMM moves the FP8 payload and its scales instead of bf16, halving the bytes. Each
rank quantises its sequence shard, the FP8 data and the scales are all-gathered, and the consumer sees
the dequantised activations. The scales are powers of two (DeepSeek-V3.1's scale_fmt="ue8m0", TE's
force_pow_2_scales), so quantisation is exact arithmetic and every implementation agrees bit for bit:

    amax  = max |x| over each 1x128 block (of the bf16 values)
    scale = the smallest power of two with amax / scale <= 448   (448 = float8_e4m3fn max)
            i.e. with amax = m * 2^e, m in [0.5, 1): scale = 2^(e-9) if m <= 0.875 else 2^(e-8)
    q     = (x.float() / scale).to(float8_e4m3fn)        (exact division, round-to-nearest-even)
    out   = all_gather(q) * all_gather(scale), in bf16   (exact: an fp8 value times a power of two)

Inputs per rank: x (tokens/ws, hidden) bf16, rank r's sequence shard.
Output: out (tokens, hidden) bf16, the dequantised gathered activations, identical on all ranks.

Tolerance: rtol 2^-8, atol 0. The result is exact, and one FP8 code off (at least 1/16 of the value)
or an unquantised value (up to 1/16 off, typically 1/32) fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "fp8_blockwise_quant_allgather"
ID = 28
TITLE = "FP8 1x128 block quantisation + all-gather (dequantised result)"
CATEGORY = "fused"
ORIGIN = ("DeepSeek-V3 FP8 training (1x128 activation tiles, act_quant); "
          "TransformerEngine Float8BlockQuantizer all-gather")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
BLOCK = 128
# full: DeepSeek-V3 hidden 7168, 16384 tokens gathered over the sequence-parallel group
SIZES = {"screen": {"tokens": 64, "hidden": 256},
         "full": {"tokens": 16384, "hidden": 7168}}
OUTPUTS = [Output("out", torch.bfloat16, rtol=2.0 ** -8, atol=0.0,
                  shape=lambda s, ws, r: (s["tokens"], s["hidden"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    # activations with outlier channels and per-token scale, where fine-grained scaling matters
    t, h = s["tokens"] // ws, s["hidden"]
    x = ctx.randn(t, h) * (0.5 + ctx.rand(t, 1)) * (1.0 + 4.0 * (ctx.rand(1, h, shared=True) > 0.98))
    return (x.to(torch.bfloat16),)


def reference(x):
    ws = dist.get_world_size()
    t, h = x.shape
    blocks = x.float().reshape(t, h // 128, 128)
    m, e = torch.frexp(blocks.abs().amax(-1))
    exp = e - 9 + (m > 0.875).to(e.dtype)                            # scale = 2^exp, (t, h/128)
    scale = (exp.to(torch.int32) + 127).bitwise_left_shift(23).view(torch.float32)  # exact 2^exp
    q = (blocks / scale[..., None]).to(torch.float8_e4m3fn)
    q_all = torch.empty(ws * t, h // 128, 128, dtype=torch.uint8, device=x.device)
    dist.all_gather_into_tensor(q_all, q.view(torch.uint8))        # fp8 moved as bytes
    s_all = torch.empty(ws * t, h // 128, dtype=scale.dtype, device=x.device)
    dist.all_gather_into_tensor(s_all, scale)
    out = q_all.view(torch.float8_e4m3fn).float() * s_all[..., None]
    return out.reshape(ws * t, h).to(torch.bfloat16)


def speed_of_light(size, world_size):
    t, h = size["tokens"], size["hidden"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * t * (h + h // 128 * 4),
            "flops": 3 * t * h / world_size}  # per rank

"""FP8 block quantisation + all-gather: DeepSeek-V3-style 1x128 activation quantisation communicated in
FP8 (TransformerEngine Float8BlockQuantizer all-gather for sequence parallelism).

FP8 training with fine-grained scaling (DeepSeek-V3; TE's Float8BlockScaling recipe) quantises
activations per token and per 128 channels. Under sequence/tensor parallelism the all-gather before the
column-parallel FP8 GEMM moves the FP8 payload and its scales instead of bf16, halving the bytes. Each
rank quantises its sequence shard, the FP8 data and fp32 scales are all-gathered, and the consumer sees
the dequantised activations:

    amax  = max |x| over each 1x128 block (computed on the bf16 values, in fp32)
    scale = amax / 448                                  (fp32; 448 = float8_e4m3fn max)
    q     = (x.float() / scale).to(float8_e4m3fn)       (IEEE division, round-to-nearest-even)
    out   = all_gather(q).float() * all_gather(scale)   (per block, sequence order)

The algorithm is exact: a candidate must reproduce the FP8 codes bit for bit (division by the scale, not
multiplication by its reciprocal), so the output keeps the fp32 default tolerance; a single FP8 rounding
difference (1/16 of a value) fails.

Inputs per rank: x (tokens/ws, hidden) bf16, rank r's sequence shard.
Output: out (tokens, hidden) fp32, the dequantised gathered activations, identical on all ranks.
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
OUTPUTS = [Output("out", torch.float32, shape=lambda s, ws, r: (s["tokens"], s["hidden"]))]


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
    scale = blocks.abs().amax(-1) / 448.0                           # (t, h/128) fp32
    q = (blocks / scale[..., None]).to(torch.float8_e4m3fn)
    q_all = torch.empty(ws * t, h // 128, 128, dtype=torch.uint8, device=x.device)
    dist.all_gather_into_tensor(q_all, q.view(torch.uint8))
    s_all = torch.empty(ws * t, h // 128, dtype=scale.dtype, device=x.device)
    dist.all_gather_into_tensor(s_all, scale)
    return (q_all.view(torch.float8_e4m3fn).float() * s_all[..., None]).reshape(ws * t, h)


def speed_of_light(size, world_size):
    t, h = size["tokens"], size["hidden"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * t * (h + h // 128 * 4),
            "flops": 3 * t * h / world_size}  # per rank

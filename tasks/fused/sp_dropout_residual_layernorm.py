"""Sequence-parallel reduce-scatter + bias-dropout-add + LayerNorm + all-gather: the piece of a
Megatron-LM transformer layer between the attention output projection and the MLP's fc1 under
sequence parallelism (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models").

Each tensor-parallel rank holds the partial sum of the attention output projection (RowParallelLinear)
for the whole sequence. Sequence parallelism turns the all-reduce into a reduce-scatter along the
sequence, so the bias, the dropout, the residual add and the LayerNorm each run on 1/ws of the tokens;
the next ColumnParallelLinear then all-gathers the normalised sequence:

    h       = reduce_scatter(partial, seq)             bf16, (S/ws, B, D): this rank's positions
    r       = residual + keep * (h + bias) / (1 - p)   the fused bias-dropout-add
    ln      = LayerNorm(r) * ln_w + ln_b               statistics in fp32, eps 1e-5
    ln_full = all_gather(ln, seq)                      (S, B, D)

Dropout is random in training; to make outputs comparable the keep mask (what Megatron's seeded
CUDA RNG tracker would draw for this rank's shard) is an input: keep (S/ws, B, D) bool with P(keep)
= 1 - p. Inputs per rank: partial (S, B, D) bf16 (scaled so the sum is O(1)); bias, ln_w, ln_b (D)
bf16, replicated; residual (S/ws, B, D) bf16, this rank's shard of the residual stream; keep; p.
Outputs: residual_out = r in bf16 (the next residual, S/ws shard) and ln_full (S, B, D) bf16.

Tolerance: bf16 defaults with atol 2e-2: the reduce-scatter sums bf16 partials in an order that
differs between implementations (a fused kernel accumulates in fp32), one bf16 ulp on O(1) values.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "sp_dropout_residual_layernorm"
ID = 66
TITLE = "Sequence-parallel reduce-scatter + bias-dropout-add + LayerNorm + all-gather"
CATEGORY = "fused"
ORIGIN = ("Megatron-LM sequence parallelism: RowParallelLinear reduce-scatter, bias_dropout_add_fused_train, "
          "LayerNorm, ColumnParallelLinear all-gather")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the sequence
# full: Llama-2-70B-sized hidden 8192, 8192 tokens per micro-batch
SIZES = {"screen": {"seq": 64, "batch": 2, "hidden": 64},
         "full": {"seq": 8192, "batch": 1, "hidden": 8192}}
OUTPUTS = [Output("residual_out", torch.bfloat16, atol=2e-2,
                  shape=lambda s, n, r: (s["seq"] // n, s["batch"], s["hidden"])),
           Output("ln_full", torch.bfloat16, atol=2e-2, shape=lambda s, n, r: (s["seq"], s["batch"], s["hidden"]))]
DROPOUT = 0.1


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    seq, b, d = s["seq"], s["batch"], s["hidden"]
    partial = ctx.randn(seq, b, d, dtype=torch.bfloat16, scale=n ** -0.5)
    bias = ctx.randn(d, dtype=torch.bfloat16, scale=0.1, shared=True)
    ln_w = (1 + ctx.randn(d, scale=0.1, shared=True)).to(torch.bfloat16)
    ln_b = ctx.randn(d, dtype=torch.bfloat16, scale=0.1, shared=True)
    residual = ctx.randn(seq // n, b, d, dtype=torch.bfloat16)
    keep = ctx.rand(seq // n, b, d) >= DROPOUT
    return partial, bias, residual, keep, ln_w, ln_b, DROPOUT


def reference(partial, bias, residual, keep, ln_w, ln_b, p):
    world = dist.get_world_size()
    seq, b, d = partial.shape
    h = partial.new_empty(seq // world, b, d)
    dist.reduce_scatter_tensor(h, partial)
    r = (residual.float() + keep * (h.float() + bias.float()) / (1 - p)).to(partial.dtype)
    ln = F.layer_norm(r.float(), (d,), ln_w.float(), ln_b.float(), eps=1e-5).to(partial.dtype)
    ln_full = torch.empty_like(partial)
    dist.all_gather_into_tensor(ln_full, ln)
    return r, ln_full


def speed_of_light(size, world_size):
    s, b, d = size["seq"], size["batch"], size["hidden"]
    act = s * b * d * 2
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * act, "flops": 12 * s * b * d / world_size}

"""Forward of a transformer MLP sub-block under Megatron-LM tensor parallelism with sequence parallelism:
LayerNorm on the sequence shard, all-gather of the sequence, column-parallel fc1 + GeLU, row-parallel
fc2, reduce-scatter back to the sequence shard, bias and residual.

The tp group is the whole world. Megatron's [s, b, h] layout: rank r holds sequence positions
[r*S/ws, (r+1)*S/ws) of x, shape (S/ws, B, D). LayerNorm weight/bias (D) and the fc2 bias (D) are
replicated; rank r owns rows [r*F/ws, (r+1)*F/ws) of fc1 (w1_s (F/ws, D), b1_s (F/ws)) and the matching
columns of fc2 (w2_s (D, F/ws)). The block:

    z   = LayerNorm(x) (eps 1e-5, over D)                    on the local sequence shard
    zg  = all-gather of z over the sequence                  (S, B, D)
    a   = gelu(zg @ w1_s^T + b1_s)                           exact (erf) GeLU, (S, B, F/ws)
    p   = a @ w2_s^T                                         partial sums, (S, B, D)
    out = reduce-scatter of p over the sequence + b2 + x     (S/ws, B, D)

Returns out (S/ws, B, D).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "megatron_sp_mlp_block"
ID = 64
TITLE = "Tensor + sequence parallel MLP block: LayerNorm, seq all-gather, column/row-parallel GEMMs, reduce-scatter"
CATEGORY = "parallelism"
ORIGIN = "Megatron-LM sequence parallelism (Korthikanti et al. 2022): ColumnParallelLinear/RowParallelLinear with SP"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
SIZES = {
    "screen": {"seq": 64, "batch": 2, "dim": 32, "ffn": 128},
    "full": {"seq": 4096, "batch": 2, "dim": 4096, "ffn": 16384},
}
OUTPUTS = [Output("out", torch.float32, shape=lambda s, n, r: (s["seq"] // n, s["batch"], s["dim"]))]


def make_inputs(ctx):
    s = ctx.size
    n, r = ctx.world_size, ctx.rank
    d, f = s["dim"], s["ffn"]
    rows = slice(r * f // n, (r + 1) * f // n)
    x = ctx.randn(s["seq"] // n, s["batch"], d)                       # local sequence shard
    ln_w = 1 + ctx.randn(d, scale=0.1, shared=True)
    ln_b = ctx.randn(d, scale=0.1, shared=True)
    w1 = ctx.randn(f, d, scale=d ** -0.5, shared=True)[rows].contiguous()
    b1 = ctx.randn(f, scale=0.1, shared=True)[rows].contiguous()
    w2 = ctx.randn(d, f, scale=f ** -0.5, shared=True)[:, rows].contiguous()
    b2 = ctx.randn(d, scale=0.1, shared=True)
    return x, ln_w, ln_b, w1, b1, w2, b2


def reference(x, ln_w, ln_b, w1_s, b1_s, w2_s, b2):
    world = dist.get_world_size()
    sl, b, d = x.shape
    z = F.layer_norm(x, (d,), ln_w, ln_b, eps=1e-5)
    zg = torch.empty(world * sl, b, d, device=x.device)
    dist.all_gather_into_tensor(zg, z)
    a = F.gelu(torch.addmm(b1_s, zg.view(-1, d), w1_s.t()))
    p = (a @ w2_s.t()).view(world * sl, b, d)
    out = torch.empty(sl, b, d, device=x.device)
    dist.reduce_scatter_tensor(out, p)
    return out + b2 + x


def speed_of_light(size, world_size):
    s, b, d, f = size["seq"], size["batch"], size["dim"], size["ffn"]
    act = s * b * d * 4
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * act,
            "flops": 4 * s * b * d * f / world_size}

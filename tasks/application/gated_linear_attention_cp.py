"""Gated linear attention with context parallelism: each rank runs the chunk-parallel form on its slice of
the sequence and the recurrent states are combined across ranks by an all-gather and a prefix scan, the
LASP-2 scheme (Sun et al. 2025) for linear-attention / state-space layers (GLA, Mamba-2 SSD, Lightning
Attention with a data-dependent scalar decay per head).

The recurrence, per batch and head, over the global sequence with a scalar gate g_t = exp(log_g_t) <= 1:

    S_t = g_t * S_{t-1} + k_t v_t^T   (S: Dk x Dv, S_0 = 0)        o_t = (q_t / sqrt(Dk))^T S_t

Rank r holds tokens [r*L, (r+1)*L): q, k (B, L, H, Dk), v (B, L, H, Dv), log_g (B, L, H) (<= 0). With the
local inclusive cumulative log-gate G_t, each rank computes
    intra  o_t = sum_{s<=t, local} exp(G_t - G_s) (q_t . k_s / sqrt(Dk)) v_s     (an L x L masked product)
    its end state from zero, B_r = sum_s exp(G_L - G_s) k_s v_s^T, and its total decay A_r = exp(G_L);
all-gathers every rank's (A, B); folds the states of the ranks before it into its incoming state,
S_in = A_{r-1} S_in(r-1) + B_{r-1}; and adds o_t += exp(G_t) (q_t / sqrt(Dk))^T S_in.

Decay rates differ per head (the gate's total log over one rank's slice is between -0.5 and -4), so
the incoming state matters, more from near ranks than from far ones.
Output: o (B, L, H, Dv) fp32, this rank's tokens.
Tolerance: rtol 1e-4 (fp32 default), atol 1e-4: each output is a sum of up to a few L terms of order one
(|o| reaches ~20 at screen size, more at full size), so entries near zero carry the rounding of the
whole sum (~1e-6 of its scale, in whatever order an implementation adds) and need an absolute floor.
"""
import math

import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "gated_linear_attention_cp"
ID = 129
TITLE = "Gated linear attention with context parallelism: all-gathered states, cross-rank prefix scan"
CATEGORY = "application"
ORIGIN = "LASP-2 (linear attention sequence parallelism, all-gather of chunk states) for GLA / Mamba-2 SSD"
WORLD_SIZES = WorldSizes(min=2)
# full: 32K tokens over 8 GPUs (4096 per rank), 16 heads of 128
SIZES = {"screen": {"batch": 1, "tokens": 16, "heads": 2, "head_dim": 16},
         "full": {"batch": 1, "tokens": 4096, "heads": 16, "head_dim": 128}}
OUTPUTS = [Output("o", torch.float32, atol=1e-4,
                  shape=lambda s, ws, r: (s["batch"], s["tokens"], s["heads"], s["head_dim"]))]


def make_inputs(ctx):
    s = ctx.size
    b, n, h, d = s["batch"], s["tokens"], s["heads"], s["head_dim"]
    q, k, v = ctx.randn(b, n, h, d), ctx.randn(b, n, h, d), ctx.randn(b, n, h, d)
    # per-head decay rate, shared: the log-gate summed over one rank's slice averages -0.5 .. -4
    rate = torch.exp(math.log(0.5) + math.log(8) * ctx.rand(h, shared=True)) / n
    log_g = -2 * rate * torch.sigmoid(ctx.randn(b, n, h))
    return q, k, v, log_g


def reference(q, k, v, log_g):
    world, rank = dist.get_world_size(), dist.get_rank()
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))                  # (B, H, L, D)
    qh = qh * q.shape[-1] ** -0.5
    cum = log_g.transpose(1, 2).cumsum(-1)                               # (B, H, L)
    causal = torch.ones(cum.shape[-1], cum.shape[-1], dtype=torch.bool, device=q.device).tril()
    decay = torch.exp((cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, float("-inf")))
    out = ((qh @ kh.transpose(-1, -2)) * decay) @ vh
    state = (kh * torch.exp(cum[..., -1:] - cum)[..., None]).transpose(-1, -2) @ vh   # (B, H, Dk, Dv)
    total = torch.exp(cum[..., -1])                                      # (B, H)
    states = state.new_empty(world, *state.shape)
    totals = total.new_empty(world, *total.shape)
    dist.all_gather_into_tensor(states, state)
    dist.all_gather_into_tensor(totals, total)
    incoming = torch.zeros_like(state)
    for r in range(rank):
        incoming = totals[r][..., None, None] * incoming + states[r]
    out = out + (qh * torch.exp(cum)[..., None]) @ incoming
    return out.transpose(1, 2).contiguous()


def speed_of_light(size, world_size):
    b, n, h, d = size["batch"], size["tokens"], size["heads"], size["head_dim"]
    return {"link_bytes_per_rank": (world_size - 1) * b * h * (d * d + 1) * 4,
            "flops": b * h * (2 * n * n * d * 2 + 2 * n * d * d * 2)}

"""Expert-parallel MoE layer forward, narrow: one large expert per rank (E = ws, top-2 routing as in
Mixtral-style 8-expert layers on 8 GPUs), with capacity-bounded (balanced) all-to-all dispatch and
combine as in GShard / DeepSpeed-MoE.

Rank r owns expert r, a SwiGLU FFN y = (silu(x w_gate^T) * (x w_up^T)) w_down^T (w_gate, w_up:
(F, D); w_down: (D, F)). Each rank routes its own T tokens x (T, D) with the router logits (T, E) the gate
produced:

    top-k     the k largest logits per token (descending); combine weights = softmax over those k
    capacity  every expert takes at most C slots from each rank (C = capacity, an input). Slots are
              filled in GShard priority order: all tokens' first choices in token order, then all
              second choices, and so on; a (token, choice) beyond C is dropped (contributes nothing)
    dispatch  a (E, C, D) buffer (empty slots zero) goes through all_to_all_single: rank r receives the
              (C, D) block of its expert from every rank
    expert    the local expert runs on its ws * C slots
    combine   the reverse all_to_all_single, then out[t] = sum_j weight[t, j] * expert_out[slot(t, j)]
              over the kept choices

Returns out (T, D).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "moe_ep_narrow_forward"
ID = 57
TITLE = "Expert-parallel MoE forward, one expert per rank: top-2 gating, capacity all-to-all dispatch/combine"
CATEGORY = "parallelism"
ORIGIN = "GShard / DeepSpeed-MoE expert parallelism (capacity dispatch, all_to_all_single), one expert per GPU"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {
    "screen": {"tokens": 32, "dim": 32, "ffn": 64, "top_k": 2, "capacity_factor": 1.25},
    "full": {"tokens": 4096, "dim": 2048, "ffn": 8192, "top_k": 2, "capacity_factor": 1.25},
}
OUTPUTS = [Output("out", torch.float32, shape=lambda s, n, r: (s["tokens"], s["dim"]))]


def _capacity(s, n):
    return -(-int(s["capacity_factor"] * s["tokens"] * s["top_k"]) // n)


def make_inputs(ctx):
    s = ctx.size
    t, d, f = s["tokens"], s["dim"], s["ffn"]
    x = ctx.randn(t, d)
    logits = ctx.randn(t, ctx.world_size)               # router output for this rank's tokens
    w_gate = ctx.randn(f, d, scale=d ** -0.5)            # this rank's expert
    w_up = ctx.randn(f, d, scale=d ** -0.5)
    w_down = ctx.randn(d, f, scale=f ** -0.5)
    return x, logits, w_gate, w_up, w_down, s["top_k"], _capacity(s, ctx.world_size)


def reference(x, logits, w_gate, w_up, w_down, top_k, capacity):
    t, d = x.shape
    e = logits.shape[1]                                              # = world: one expert per rank
    c = capacity
    # top-k gating
    top_val, top_idx = logits.topk(top_k, dim=-1)                     # (T, k), descending
    weights = torch.softmax(top_val, dim=-1)
    # GShard priority: position of each (choice, token) in its expert, choice-major
    onehot = F.one_hot(top_idx.t().reshape(-1), e)                   # (k*T, E)
    loc = ((onehot.cumsum(0) - 1) * onehot).sum(-1).view(top_k, t).t()   # (T, k)
    keep = loc < c
    slot = torch.where(keep, top_idx * c + loc, e * c)               # dropped -> a spare row
    # dispatch
    buf = torch.zeros(e * c + 1, d, device=x.device)
    buf.index_copy_(0, slot.reshape(-1), x.unsqueeze(1).expand(t, top_k, d).reshape(-1, d))
    recv = torch.empty(e * c, d, device=x.device)
    dist.all_to_all_single(recv, buf[:e * c])
    # the local expert (SwiGLU) on the slots received from every rank
    y = (F.silu(recv @ w_gate.t()) * (recv @ w_up.t())) @ w_down.t()
    # combine
    back = torch.empty(e * c, d, device=x.device)
    dist.all_to_all_single(back, y)
    back = torch.cat([back, back.new_zeros(1, d)])
    return (back[slot] * (weights * keep).unsqueeze(-1)).sum(1)


def speed_of_light(size, world_size):
    d, f = size["dim"], size["ffn"]
    c = _capacity(size, world_size)
    moved = 2 * (world_size - 1) / world_size * world_size * c * d * 4
    return {"link_bytes_per_rank": moved, "flops": world_size * c * 6 * d * f}

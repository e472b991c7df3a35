"""Expert-parallel MoE layer forward, wide: many small experts per rank (fine-grained MoE, top-k routing),
with capacity-bounded (balanced) all-to-all dispatch and combine as in GShard / DeepSpeed-MoE / Tutel.

E = ws * E_local experts; rank r owns experts [r*E_local, (r+1)*E_local), each a SwiGLU FFN
y = (silu(x w_gate^T) * (x w_up^T)) w_down^T (w_gate, w_up: (F, D); w_down: (D, F)), stacked over the
local experts. Each rank routes its own T tokens x (T, D) with the router logits (T, E) the gate
produced:

    top-k     the k largest logits per token (descending); combine weights = softmax over those k
    capacity  every expert takes at most C slots from each rank (C = capacity, an input). Slots are
              filled in GShard priority order: all tokens' first choices in token order, then all
              second choices, and so on; a (token, choice) beyond C is dropped (contributes nothing)
    dispatch  a (E, C, D) buffer (empty slots zero) goes through all_to_all_single: rank r receives the
              (E_local, C, D) blocks of its experts from every rank
    experts   each local expert runs on its ws * C slots (a batched GEMM over the local experts)
    combine   the reverse all_to_all_single, then out[t] = sum_j weight[t, j] * expert_out[slot(t, j)]
              over the kept choices

Returns out (T, D).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "moe_ep_wide_forward"
ID = 56
TITLE = "Expert-parallel MoE forward, many experts per rank: top-k gating, capacity all-to-all dispatch/combine"
CATEGORY = "parallelism"
ORIGIN = "GShard / DeepSpeed-MoE expert parallelism (capacity dispatch, all_to_all_single), fine-grained experts"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {
    "screen": {"tokens": 32, "dim": 32, "ffn": 32, "local_experts": 4, "top_k": 4, "capacity_factor": 1.25},
    "full": {"tokens": 4096, "dim": 2048, "ffn": 1408, "local_experts": 8, "top_k": 6, "capacity_factor": 1.25},
}
OUTPUTS = [Output("out", torch.float32, shape=lambda s, n, r: (s["tokens"], s["dim"]))]


def _capacity(s, n):
    return -(-int(s["capacity_factor"] * s["tokens"] * s["top_k"]) // (n * s["local_experts"]))


def make_inputs(ctx):
    s = ctx.size
    t, d, f, el = s["tokens"], s["dim"], s["ffn"], s["local_experts"]
    x = ctx.randn(t, d)
    logits = ctx.randn(t, ctx.world_size * el)          # router output for this rank's tokens
    w_gate = ctx.randn(el, f, d, scale=d ** -0.5)        # this rank's experts
    w_up = ctx.randn(el, f, d, scale=d ** -0.5)
    w_down = ctx.randn(el, d, f, scale=f ** -0.5)
    return x, logits, w_gate, w_up, w_down, s["top_k"], _capacity(s, ctx.world_size)


def reference(x, logits, w_gate, w_up, w_down, top_k, capacity):
    world = dist.get_world_size()
    t, d = x.shape
    e = logits.shape[1]
    el = e // world
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
    tokens = recv.view(world, el, c, d).transpose(0, 1).reshape(el, world * c, d)
    # local experts (SwiGLU), batched over the local experts
    h = F.silu(torch.bmm(tokens, w_gate.transpose(1, 2))) * torch.bmm(tokens, w_up.transpose(1, 2))
    y = torch.bmm(h, w_down.transpose(1, 2))
    # combine
    back = torch.empty(e * c, d, device=x.device)
    dist.all_to_all_single(back, y.view(el, world, c, d).transpose(0, 1).reshape(e * c, d))
    back = torch.cat([back, back.new_zeros(1, d)])
    return (back[slot] * (weights * keep).unsqueeze(-1)).sum(1)


def speed_of_light(size, world_size):
    d, f, el = size["dim"], size["ffn"], size["local_experts"]
    c = _capacity(size, world_size)
    moved = 2 * (world_size - 1) / world_size * world_size * el * c * d * 4
    return {"link_bytes_per_rank": moved, "flops": el * world_size * c * 6 * d * f}

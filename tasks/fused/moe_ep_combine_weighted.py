"""Expert-parallel MoE combine: expert outputs restored to arrival order, sent back to the tokens' ranks
with an uneven all-to-all, un-permuted and summed with the router weights (Megatron-Core
MoEAlltoAllTokenDispatcher.token_unpermutation: sort_chunks_by_idxs, all-to-all, unpermute with probs).

E experts over ws ranks, rank r owns experts [r*E/ws, (r+1)*E/ws). The dispatch (not part of this task)
sent each token once per chosen expert, sorted by global expert id, so rank r received from each source
rank s a block ordered by local expert, then by token; it regrouped the rows by local expert (all
sources of expert 0, then expert 1, ...) and ran the experts. The combine undoes this:

    1. reorder the expert outputs from (local expert, source) chunks back to (source, local expert);
    2. all-to-all: the rows of source s go back to rank s (split sizes known from the dispatch);
    3. unpermute: the returned rows are in the dispatch order (token copies stably sorted by expert id);
       out[t] = sum_j probs[t, j] * y[t, j], summed in fp32 and rounded to bf16.

Inputs per rank: expert_out (R, H) bf16, the outputs of the R rows this rank's experts processed,
grouped by local expert then source; recv_counts (ws, E/ws) int64, the rows received from each source
for each local expert; topk_idx (T, k) int64, this rank's routing (distinct experts per token); probs
(T, k) fp32 router weights. Output: out (T, H) bf16. Tolerance: bf16 defaults (one rounding of an fp32
sum). The split sizes come from the routing, so a full-size run needs real values.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "moe_ep_combine_weighted"
ID = 73
TITLE = "MoE expert-parallel combine: restore chunk order, uneven all-to-all back, router-weighted unpermute"
CATEGORY = "fused"
ORIGIN = "Megatron-Core MoEAlltoAllTokenDispatcher.token_unpermutation (sort_chunks_by_idxs, all-to-all, unpermute)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=16)  # ws divides the expert count (16 at screen size)
# full: DeepSeek-V3's MoE (256 experts, top-8, hidden 7168), 4096 tokens per rank
SIZES = {"screen": {"tokens": 32, "hidden": 32, "experts": 16, "topk": 4},
         "full": {"tokens": 4096, "hidden": 7168, "experts": 256, "topk": 8}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, n, r: (s["tokens"], s["hidden"]))]


def make_inputs(ctx):
    s, n, r = ctx.size, ctx.world_size, ctx.rank
    t, e, k = s["tokens"], s["experts"], s["topk"]
    # every rank draws all ranks' routing (shared) to know what it received; per-rank expert
    # preferences make the loads uneven
    logits = ctx.randn(n, t, e, shared=True) + ctx.randn(n, 1, e, scale=0.5, shared=True)
    top_logits, topk_idx = logits.topk(k, dim=-1)                       # (ws, T, k)
    routes = torch.zeros(n, e, dtype=torch.int64, device=topk_idx.device)
    routes.scatter_add_(1, topk_idx.reshape(n, -1), torch.ones_like(topk_idx.reshape(n, -1)))
    recv_counts = routes[:, r * e // n:(r + 1) * e // n].contiguous()  # (source, local expert)
    expert_out = ctx.randn(int(recv_counts.sum()), s["hidden"], dtype=torch.bfloat16)
    return expert_out, recv_counts, topk_idx[r].contiguous(), top_logits[r].softmax(-1)


def reference(expert_out, recv_counts, topk_idx, probs):
    world, e_local = recv_counts.shape
    t, k = topk_idx.shape
    # 1. (local expert, source) chunks -> (source, local expert)
    chunks = expert_out.split(recv_counts.t().reshape(-1).tolist())
    restored = torch.cat([chunks[e * world + src] for src in range(world) for e in range(e_local)])
    # 2. back to the tokens' ranks
    flat = topk_idx.reshape(-1)
    sent = torch.zeros(world * e_local, dtype=torch.int64, device=flat.device)
    sent = sent.scatter_add_(0, flat, torch.ones_like(flat)).view(world, e_local).sum(1)
    back = expert_out.new_empty(t * k, expert_out.shape[1])
    dist.all_to_all_single(back, restored, sent.tolist(), recv_counts.sum(1).tolist())
    # 3. unpermute and weight
    per_copy = torch.empty_like(back)
    per_copy[torch.argsort(flat, stable=True)] = back
    return (per_copy.view(t, k, -1).float() * probs[..., None]).sum(1).to(expert_out.dtype)


def speed_of_light(size, world_size):
    t, h, k = size["tokens"], size["hidden"], size["topk"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * t * k * h * 2, "flops": 2 * t * k * h}

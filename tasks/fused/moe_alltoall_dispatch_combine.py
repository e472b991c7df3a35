"""MoE token permute + all-to-all dispatch + expert MLPs + all-to-all combine + unpermute: Megatron-Core's
MoEAlltoAllTokenDispatcher (dropless, expert parallelism over all ranks).

Each rank holds `tokens` tokens and their router decision (top-k experts and weights), and the SwiGLU
weights of its E/ws local experts (rank r owns experts [r*E/ws, (r+1)*E/ws)). The layer:

  1. permute: replicate each token once per chosen expert and sort the copies by expert id (stable);
  2. exchange the per-expert token counts (all-to-all), then the tokens (all-to-all with uneven splits);
  3. group the received tokens by local expert and run each expert: y = (silu(x W_g) * (x W_u)) W_d,
     with bf16 GEMMs and the activation product in fp32 (rounded to bf16 before the down projection);
  4. send the expert outputs back (the inverse all-to-all) and unpermute: out[t] = sum_k p[t,k] * y[t,k],
     summed in fp32 and rounded to bf16.

Inputs per rank: x (tokens, hidden) bf16; topk_idx (tokens, k) int64, distinct experts per token;
topk_probs (tokens, k) fp32 (softmax over the chosen logits); w_gate_up (E/ws, hidden, 2*ffn) bf16 (gate
columns first, then up); w_down (E/ws, ffn, hidden) bf16.
Output: out (tokens, hidden) bf16.

The split sizes depend on the routing, so a full-size run needs real values.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "moe_alltoall_dispatch_combine"
ID = 34
TITLE = "MoE permute + all-to-all dispatch + expert SwiGLU + all-to-all combine + unpermute"
CATEGORY = "fused"
ORIGIN = ("Megatron-Core MoEAlltoAllTokenDispatcher (permute / sort_chunks_by_idxs / unpermute), dropless "
          "expert parallelism")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=16)
# full: DeepSeek-V2-Lite MoE layer (hidden 2048, 64 experts of ffn 1408, top-6), 8192 tokens per rank
SIZES = {"screen": {"tokens": 32, "hidden": 32, "ffn": 16, "experts": 16, "topk": 4},
         "full": {"tokens": 8192, "hidden": 2048, "ffn": 1408, "experts": 64, "topk": 6}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, ws, r: (s["tokens"], s["hidden"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    t, h, f, e, k = s["tokens"], s["hidden"], s["ffn"], s["experts"], s["topk"]
    x = ctx.randn(t, h, dtype=torch.bfloat16)
    # router: per-token logits with a per-rank expert preference, so loads are uneven
    logits = ctx.randn(t, e) + ctx.randn(1, e, scale=0.5)
    top_logits, topk_idx = logits.topk(k, dim=-1)
    topk_probs = top_logits.softmax(-1)
    w_gate_up = ctx.randn(e // ws, h, 2 * f, dtype=torch.bfloat16, scale=h ** -0.5)
    w_down = ctx.randn(e // ws, f, h, dtype=torch.bfloat16, scale=f ** -0.5)
    return x, topk_idx, topk_probs, w_gate_up, w_down


def reference(x, topk_idx, topk_probs, w_gate_up, w_down):
    ws = dist.get_world_size()
    t, h = x.shape
    k = topk_idx.shape[1]
    e_local = w_gate_up.shape[0]
    n_exp = e_local * ws
    # 1. permute
    flat = topk_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    permuted = x[order // k]
    counts = torch.zeros(n_exp, dtype=torch.int64, device=x.device).scatter_add_(0, flat, torch.ones_like(flat))
    # 2. dispatch: counts, then tokens
    recv_counts = torch.zeros_like(counts)  # (ws * e_local,): [source rank][local expert]
    dist.all_to_all_single(recv_counts, counts)
    send_splits = counts.view(ws, e_local).sum(1).tolist()
    recv_splits = recv_counts.view(ws, e_local).sum(1).tolist()
    recv = x.new_empty(sum(recv_splits), h)
    dist.all_to_all_single(recv, permuted, recv_splits, send_splits)
    # 3. group by local expert (received order: by source rank, then expert) and run the experts
    local_e = torch.repeat_interleave(torch.arange(e_local, device=x.device).repeat(ws), recv_counts)
    by_expert = torch.argsort(local_e, stable=True)
    grouped = recv[by_expert]
    outs = []
    for e, chunk in enumerate(grouped.split(recv_counts.view(ws, e_local).sum(0).tolist())):
        gate, up = (chunk @ w_gate_up[e]).float().chunk(2, dim=-1)
        outs.append((F.silu(gate) * up).to(x.dtype) @ w_down[e])
    y = torch.empty_like(grouped)
    y[by_expert] = torch.cat(outs)
    # 4. combine and unpermute
    back = x.new_empty(t * k, h)
    dist.all_to_all_single(back, y, send_splits, recv_splits)
    per_copy = torch.empty_like(back)
    per_copy[order] = back
    out = (per_copy.view(t, k, h).float() * topk_probs[..., None]).sum(1)
    return out.to(x.dtype)


def speed_of_light(size, world_size):
    t, h, f, k = size["tokens"], size["hidden"], size["ffn"], size["topk"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * t * k * h * 2,
            "flops": 6 * t * k * h * f}  # per rank, with balanced routing

"""Cross-node MoE dispatch and combine with node-limited routing (DeepSeek-V3): every token is routed
to its top-k experts chosen among at most M nodes, so a dispatch that sends each token once per
destination node over the network and fans it out over NVLink inside the node (DeepEP's internode
kernels) moves at most M copies across nodes instead of k.

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size). E experts, E/world_size per rank: rank r owns experts [r*E/ws, (r+1)*E/ws), so
node n owns the contiguous group [n*E/N, (n+1)*E/N) (N nodes).

Routing (done in make_inputs, as the gate does before dispatch): sigmoid affinities s (tokens, E); a
node's score is the sum of its two highest affinities (top k/M, DeepSeek-V3's 8/4); each token keeps its
top min(M, N) nodes and picks its top-k experts among their experts; weights are the chosen affinities
normalised to sum to 1.

Inputs per rank: x (tokens, hidden) bf16; topk_idx (tokens, k) int64; topk_weights (tokens, k) fp32;
expert_gain (E/ws, hidden) bf16, the local experts. The experts are stand-ins, a diagonal map
y = gain_e * x (in fp32, rounded to bf16), so the task measures dispatch and combine (as DeepEP's
benchmarks do) while a token sent to the wrong expert still fails. Output: out (tokens, hidden) bf16,
out[t] = sum_j topk_weights[t, j] * y_{topk_idx[t, j]}(x[t]), summed in fp32 and rounded to bf16.

The reference is the plain NCCL dispatcher (one copy per (token, expert) pair in an uneven
all_to_all_single, the per-expert counts exchanged first, the inverse all-to-all to combine).
Tolerance: the bf16 defaults; any correct candidate differs only by bf16 rounding of y or of the sum.
The split sizes depend on the routing, so a full-size run needs real values.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node

SLUG = "moe_node_limited_dispatch"
ID = 148
TITLE = "Cross-node MoE dispatch + combine with node-limited (DeepSeek-V3) routing"
CATEGORY = "internode"
ORIGIN = "DeepSeek-V3 node-limited routing (at most M nodes per token) with DeepEP internode dispatch/combine"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8, power_of_two=True)  # E/world_size experts per rank
# full: DeepSeek-V3 (256 routed experts, top-8 within 4 nodes, hidden 7168), 4096 tokens per rank
SIZES = {"screen": {"tokens": 32, "hidden": 32, "experts": 64, "topk": 4, "max_nodes": 2, "gpus_per_node": 4},
         "full": {"tokens": 4096, "hidden": 7168, "experts": 256, "topk": 8, "max_nodes": 4, "gpus_per_node": 8}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, ws, r: (s["tokens"], s["hidden"]))]


def _node_limited_topk(scores, nodes, max_nodes, k):
    """DeepSeek-V3 group-limited gating with one expert group per node."""
    tokens, experts = scores.shape
    per_node = scores.view(tokens, nodes, experts // nodes)
    node_score = per_node.topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(node_score, dtype=torch.bool).scatter_(1, node_score.topk(max_nodes, -1).indices, True)
    allowed = scores.masked_fill(~keep.repeat_interleave(experts // nodes, dim=1), 0.0)
    weights, idx = allowed.topk(k, dim=-1)
    return idx, weights / weights.sum(-1, keepdim=True)


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    nodes = ws // gpus_per_node(s, ws)
    if s["experts"] % ws or s["experts"] // nodes * min(s["max_nodes"], nodes) < s["topk"]:
        raise ValueError(f"{s['experts']} experts do not spread over {ws} ranks with top-{s['topk']} routing; "
                         f"use a power-of-two world size of at most {s['experts'] // 2}")
    x = ctx.randn(s["tokens"], s["hidden"], dtype=torch.bfloat16)
    # router logits with a per-rank preference, so loads differ between ranks and nodes
    scores = torch.sigmoid(ctx.randn(s["tokens"], s["experts"]) + ctx.randn(1, s["experts"], scale=0.5))
    topk_idx, topk_weights = _node_limited_topk(scores, nodes, min(s["max_nodes"], nodes), s["topk"])
    expert_gain = ctx.randn(s["experts"] // ws, s["hidden"], dtype=torch.bfloat16)
    return x, topk_idx, topk_weights, expert_gain


def reference(x, topk_idx, topk_weights, expert_gain):
    ws = dist.get_world_size()
    t, h = x.shape
    k, e_local = topk_idx.shape[1], expert_gain.shape[0]
    # dispatch: one copy per (token, expert), sorted by expert (so by destination rank)
    flat = topk_idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = flat.new_zeros(e_local * ws).scatter_add_(0, flat, torch.ones_like(flat))
    recv_counts = torch.empty_like(counts)                     # [source rank][local expert]
    dist.all_to_all_single(recv_counts, counts)
    send_splits = counts.view(ws, e_local).sum(1).tolist()
    recv_splits = recv_counts.view(ws, e_local).sum(1).tolist()
    recv = x.new_empty(sum(recv_splits), h)
    dist.all_to_all_single(recv, x[order // k], recv_splits, send_splits)
    # experts: received rows come by source rank, then by local expert
    local_expert = torch.repeat_interleave(torch.arange(e_local, device=x.device).repeat(ws), recv_counts)
    y = (recv.float() * expert_gain[local_expert].float()).to(x.dtype)
    # combine: inverse all-to-all, unpermute, weighted sum
    back = x.new_empty(t * k, h)
    dist.all_to_all_single(back, y, send_splits, recv_splits)
    per_copy = torch.empty_like(back)
    per_copy[order] = back
    return (per_copy.view(t, k, h).float() * topk_weights[..., None]).sum(1).to(x.dtype)


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    nodes = world_size // g
    t, h, k = size["tokens"], size["hidden"], size["topk"]
    m = min(size["max_nodes"], nodes)
    network = 2 * t * m * (nodes - 1) / nodes * h * 2       # once per remote node, dispatch and combine
    nvlink = 2 * t * k * (g - 1) / g * h * 2
    return {"link_bytes_per_rank": nvlink + network, "network_bytes_per_rank": network, "flops": 3 * t * k * h}

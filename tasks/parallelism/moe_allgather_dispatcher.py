"""MoE layer forward with the all-gather token dispatcher: every rank gathers all tokens and their
routing, runs its local experts on the tokens routed to them, and a reduce-scatter returns each rank
the combined output of its own tokens (Megatron-Core MoEAllGatherTokenDispatcher, the dispatcher used
with tensor/expert parallelism when the routed fraction per rank is large).

E experts over ws ranks, rank r owns experts [r*E/ws, (r+1)*E/ws), each a SwiGLU FFN
y = (silu(x W_g) * (x W_u)) W_d with bf16 GEMMs and the activation product in fp32 rounded to bf16.
Each rank holds T tokens x (T, H) bf16 and their router decision: topk_idx (T, k) int64 (distinct
experts per token) and probs (T, k) fp32. The layer:

    gather   x, topk_idx, probs from every rank (all-gather, rank order): ws*T tokens
    experts  for each local expert e: the gathered tokens that chose e (in token order), y_e, weighted
             by their router probability, summed into a (ws*T, H) fp32 buffer at the tokens' positions
    combine  round the buffer to bf16 and reduce-scatter it (sum over the ranks whose experts served a
             token): rank r gets rows [r*T, (r+1)*T), its own tokens

Output: out (T, H) bf16. Tolerance: bf16 defaults with atol 2e-2 (the reduce-scatter sums bf16 rows in
an implementation-defined order). How many tokens each expert serves depends on the routing, so a
full-size run needs real values.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "moe_allgather_dispatcher"
ID = 82
TITLE = "MoE with the all-gather dispatcher: gather tokens + routing, local experts, reduce-scatter combine"
CATEGORY = "parallelism"
ORIGIN = "Megatron-Core MoEAllGatherTokenDispatcher (all-gather tokens, local expert selection, reduce-scatter)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=16)  # ws divides the expert count
# full: DeepSeek-V2-Lite MoE layer (hidden 2048, 64 experts of ffn 1408, top-6), 2048 tokens per rank
SIZES = {"screen": {"tokens": 16, "hidden": 32, "ffn": 16, "experts": 16, "topk": 4},
         "full": {"tokens": 2048, "hidden": 2048, "ffn": 1408, "experts": 64, "topk": 6}}
OUTPUTS = [Output("out", torch.bfloat16, atol=2e-2, shape=lambda s, n, r: (s["tokens"], s["hidden"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    t, h, f, e, k = s["tokens"], s["hidden"], s["ffn"], s["experts"], s["topk"]
    x = ctx.randn(t, h, dtype=torch.bfloat16)
    logits = ctx.randn(t, e) + ctx.randn(1, e, scale=0.5)      # a per-rank preference: uneven loads
    top_logits, topk_idx = logits.topk(k, dim=-1)
    w_gate_up = ctx.randn(e // n, h, 2 * f, dtype=torch.bfloat16, scale=h ** -0.5)
    w_down = ctx.randn(e // n, f, h, dtype=torch.bfloat16, scale=f ** -0.5)
    return x, topk_idx, top_logits.softmax(-1), w_gate_up, w_down


def _gather(t):
    world = dist.get_world_size()
    out = t.new_empty(world * t.shape[0], *t.shape[1:])
    dist.all_gather_into_tensor(out, t)
    return out


def reference(x, topk_idx, probs, w_gate_up, w_down):
    rank = dist.get_rank()
    k, e_local = topk_idx.shape[1], w_gate_up.shape[0]
    gx, gidx, gprobs = _gather(x), _gather(topk_idx), _gather(probs)
    local = gidx.reshape(-1) - rank * e_local
    key = torch.where((local >= 0) & (local < e_local), local, e_local)   # not mine: sorted last
    order = torch.argsort(key, stable=True)
    counts = torch.zeros(e_local + 1, dtype=torch.int64, device=x.device).scatter_add_(0, key, torch.ones_like(key))
    combined = torch.zeros(gx.shape, dtype=torch.float32, device=x.device)
    for e, copies in enumerate(order.split(counts.tolist())[:e_local]):
        tokens = copies // k
        gate, up = (gx[tokens] @ w_gate_up[e]).float().chunk(2, dim=-1)
        y = (F.silu(gate) * up).to(x.dtype) @ w_down[e]
        combined.index_add_(0, tokens, y.float() * gprobs.reshape(-1)[copies, None])
    out = torch.empty_like(x)
    dist.reduce_scatter_tensor(out, combined.to(x.dtype))
    return out


def speed_of_light(size, world_size):
    t, h, f, k = size["tokens"], size["hidden"], size["ffn"], size["topk"]
    moved = (world_size - 1) * t * h * 2 * 2                  # gather the tokens, reduce-scatter the output
    return {"link_bytes_per_rank": moved, "flops": 6 * t * k * h * f}

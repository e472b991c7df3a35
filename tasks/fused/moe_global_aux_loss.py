"""MoE router top-k + load-balancing auxiliary loss with token counts reduced over the group:
Megatron-Core's TopKRouter with moe_router_load_balancing_type="global_aux_loss".

The Switch/GShard load-balancing loss penalises the product of each expert's routed-token fraction and
its mean router probability. Megatron's global variant (as in Qwen's global-batch balancing) counts the
tokens per expert over the whole data/tensor-parallel group, so the loss balances the global batch rather
than each micro-batch:

    probs             = softmax(logits)                           # fp32, over all experts
    topk_idx          = top-k experts by logit (the same order as by probability)
    tokens_per_expert = all_reduce_sum(bincount(topk_idx))        # (E,), global
    total_tokens      = tokens * world_size
    aux_loss          = sum_e(probs.sum(0)[e] * tokens_per_expert[e]) * E * coeff / (k * total_tokens^2)

(switch_load_balancing_loss_func: the probabilities are this rank's, the counts global; each rank's loss
is its contribution.) Experts are chosen from the logits rather than the rounded probabilities so that
ties cannot arise.

Inputs per rank: logits (tokens, E) fp32; topk (int); coeff (float).
Outputs: aux_loss () fp32 (this rank's contribution, about coeff / world_size: atol 0, a sum of positive
terms, so rtol 1e-4 alone is meaningful); tokens_per_expert (E,) int64, identical on all ranks;
topk_probs (tokens, k) fp32, the routing weights (softmax probabilities of the chosen experts).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "moe_global_aux_loss"
ID = 35
TITLE = "MoE router top-k + global-batch load-balancing auxiliary loss"
CATEGORY = "fused"
ORIGIN = "Megatron-Core TopKRouter, moe_router_load_balancing_type='global_aux_loss' (switch_load_balancing_loss_func)"
WORLD_SIZES = WorldSizes(min=2)
# full: DeepSeek-V3 router (256 experts, top-8), 16384 tokens per rank
SIZES = {"screen": {"tokens": 64, "experts": 16, "topk": 4},
         "full": {"tokens": 16384, "experts": 256, "topk": 8}}
OUTPUTS = [Output("aux_loss", torch.float32, atol=0.0, shape=lambda s, ws, r: ()),
           Output("tokens_per_expert", torch.int64, shape=lambda s, ws, r: (s["experts"],)),
           Output("topk_probs", torch.float32, shape=lambda s, ws, r: (s["tokens"], s["topk"]))]


def make_inputs(ctx):
    s = ctx.size
    # per-rank expert preference on top of per-token noise: the local batches are unbalanced differently
    logits = ctx.randn(s["tokens"], s["experts"]) + ctx.randn(1, s["experts"])
    return logits, s["topk"], 1e-2


def reference(logits, topk, coeff):
    ws = dist.get_world_size()
    t, n_exp = logits.shape
    probs = logits.softmax(-1)
    topk_idx = logits.topk(topk, dim=-1).indices
    flat = topk_idx.reshape(-1)
    tokens_per_expert = torch.zeros(n_exp, dtype=torch.int64, device=logits.device).scatter_add_(
        0, flat, torch.ones_like(flat))
    dist.all_reduce(tokens_per_expert)
    total = t * ws
    aux = (probs.sum(0) * tokens_per_expert).sum() * (n_exp * coeff / (topk * total * total))
    return aux, tokens_per_expert, probs.gather(1, topk_idx)


def speed_of_light(size, world_size):
    t, e = size["tokens"], size["experts"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * e * 8, "flops": 6 * t * e}  # per rank

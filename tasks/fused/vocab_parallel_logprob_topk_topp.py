"""Vocab-parallel token log-probabilities under top-k / top-p filtering: NeMo-RL's
DistributedLogprobWithSampling (GRPO training with vLLM sampling parameters).

When rollouts are generated with top-k / top-p sampling, the trainer must score the sampled tokens under
the same filtered distribution, or the importance ratios are biased. The logits are vocab-parallel
(each tensor-parallel rank holds a vocab slice for every token), but top-k / top-p need the whole
vocabulary of a token. NeMo-RL therefore switches layout with an all-to-all (vocab-parallel ->
token-parallel), filters and takes the log-softmax locally, and all-gathers the per-token results:

    z      = all_to_all(logits)        # rank r: tokens [r*T/ws, (r+1)*T/ws), full vocabulary (vocab order)
    z_f    = apply_top_k_top_p(z)      # vLLM semantics, below
    lp     = log_softmax(z_f)[target]
    out    = all_gather(lp)            # (T,) on every rank

apply_top_k_top_p (vLLM's PyTorch implementation, which NeMo-RL reuses): sort each row ascending; top-k
masks (to -inf) every logit strictly below the k-th largest; top-p then takes the softmax of the
remaining sorted logits, its inclusive cumulative sum c, and masks the positions with c <= 1 - top_p,
always keeping the largest logit. Targets are sampled from this filtered distribution (as the rollout
engine did), so every log-probability is finite.

Inputs per rank: logits (tokens, vocab/ws) fp32, rank r holding vocab ids [r*V/ws, (r+1)*V/ws);
target (tokens,) int64, identical on all ranks; top_k (int); top_p (float).
Output: logprobs (tokens,) fp32, identical on all ranks.

The logits are fp32 here so that sorting has no ties (bf16 logits tie often, and which of two tied
logits top-p drops is then implementation-defined).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "vocab_parallel_logprob_topk_topp"
ID = 26
TITLE = "Vocab-parallel log-probs with top-k/top-p filtering (all-to-all to token-parallel)"
CATEGORY = "fused"
ORIGIN = "NeMo-RL distributed/model_utils.py DistributedLogprobWithSampling (GRPO with vLLM top-k/top-p)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=16)
# full: Qwen2.5 vocabulary (151936 = 8 * 18992), 8192 tokens (2 x 4096) per micro-batch
SIZES = {"screen": {"tokens": 32, "vocab": 256, "top_k": 16, "top_p": 0.9},
         "full": {"tokens": 8192, "vocab": 151936, "top_k": 50, "top_p": 0.95}}
OUTPUTS = [Output("logprobs", torch.float32, shape=lambda s, ws, r: (s["tokens"],))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    t, v, k, p = s["tokens"], s["vocab"], s["top_k"], s["top_p"]
    logits = ctx.randn(t, v // ws, scale=2.0)
    # sample the targets from the filtered distribution, as the rollout engine did (outside timing)
    full = torch.empty(ws, t, v // ws, device=logits.device)
    dist.all_gather_into_tensor(full, logits)
    z = full.permute(1, 0, 2).reshape(t, v)
    zs, _ = z.sort(-1)
    keep = zs >= zs[:, v - k:v - k + 1]
    probs = torch.where(keep, zs, float("-inf")).softmax(-1)
    keep &= probs.cumsum(-1) > 1 - p
    keep[:, -1] = True
    threshold = torch.where(keep, zs, float("inf")).amin(-1, keepdim=True)  # smallest kept logit
    pf = torch.where(z >= threshold, (z - zs[:, -1:]).exp(), 0.0)
    cdf = pf.cumsum(-1)
    u = ctx.rand(t, 1, shared=True) * 0.998 + 0.001
    target = torch.searchsorted(cdf, u * cdf[:, -1:]).squeeze(1).clamp(0, v - 1)
    return logits, target, k, p


def reference(logits, target, top_k, top_p):
    ws, rank = dist.get_world_size(), dist.get_rank()
    t, v_local = logits.shape
    t_local = t // ws
    recv = torch.empty(ws, t_local, v_local, dtype=logits.dtype, device=logits.device)
    dist.all_to_all_single(recv, logits.contiguous())
    z = recv.permute(1, 0, 2).reshape(t_local, ws * v_local)
    # vLLM apply_top_k_top_p
    zs, order = z.sort(-1)
    zs = zs.masked_fill(zs < zs[:, zs.shape[1] - top_k:zs.shape[1] - top_k + 1], float("-inf"))
    drop = zs.softmax(-1).cumsum(-1) <= 1 - top_p
    drop[:, -1] = False
    zs = zs.masked_fill(drop, float("-inf"))
    filtered = torch.empty_like(z).scatter_(-1, order, zs)
    logp = filtered.log_softmax(-1)
    lp = logp.gather(-1, target[rank * t_local:(rank + 1) * t_local, None]).squeeze(1)
    out = torch.empty(t, dtype=lp.dtype, device=lp.device)
    dist.all_gather_into_tensor(out, lp)
    return out


def speed_of_light(size, world_size):
    t, v = size["tokens"], size["vocab"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * (t * v / world_size * 4 + t * 4),
            "flops": 8 * t * v / world_size}  # per rank, not counting the sort

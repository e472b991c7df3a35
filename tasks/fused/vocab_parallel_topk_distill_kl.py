"""Vocab-parallel distillation KL against the teacher's top-k log-probabilities: forward KL and the
gradient with respect to the student's logits (NeMo-RL on-policy distillation,
ChunkedDistributedGatherLogprob; Megatron/ModelOpt vocab-parallel logits KL).

The teacher sends, per token, its top-k token ids and their log-probabilities; the student's logits are
vocab-parallel over the tensor-parallel group (rank r holds ids [r*V/ws, (r+1)*V/ws)). The loss is the
forward KL restricted to the teacher's top-k, which needs the student's distributed log-softmax and a
distributed gather of the student's log-probabilities at the teacher's ids:

    lse      = m + log(all_reduce_sum(sum_v exp(z - m))),    m = all_reduce_max(max_v z)
    log_q_i  = all_reduce_sum(z[id_i] if id_i is local else 0) - lse          # i = 1..k
    kl       = sum_i p_i * (log p_i - log_q_i),              p_i = exp(teacher_logprob_i)
    dlogits  = softmax(z) * sum_i p_i - scatter(p_i at id_i)                   # d kl / d z, local slice

All arithmetic is fp32 from the bf16 logits.

Inputs per rank: logits (tokens, vocab/ws) bf16; teacher_logprobs (tokens, k) fp32 and teacher_ids
(tokens, k) int64 (distinct ids per token), identical on all ranks.
Outputs: kl (tokens,) fp32, identical on all ranks; dlogits (tokens, vocab/ws) bf16 (values of order
1/vocab, so atol is 1e-12 and the bf16 rtol of 2e-2 does the work).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "vocab_parallel_topk_distill_kl"
ID = 42
TITLE = "Vocab-parallel top-k distillation KL: loss and student-logits gradient"
CATEGORY = "fused"
ORIGIN = ("NeMo-RL on-policy distillation (ChunkedDistributedGatherLogprob, teacher top-k); "
          "Megatron/ModelOpt vocab-parallel logits KL loss")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)
# full: Qwen2.5 vocabulary (151936), 8192 tokens, teacher top-64
SIZES = {"screen": {"tokens": 32, "vocab": 512, "topk": 8},
         "full": {"tokens": 8192, "vocab": 151936, "topk": 64}}
OUTPUTS = [Output("kl", torch.float32, shape=lambda s, ws, r: (s["tokens"],)),
           Output("dlogits", torch.bfloat16, atol=1e-12, shape=lambda s, ws, r: (s["tokens"], s["vocab"] // ws))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    t, v, k = s["tokens"], s["vocab"], s["topk"]
    logits = ctx.randn(t, v // ws, dtype=torch.bfloat16, scale=2.0)
    # k distinct ids per token: random increasing gaps (total < vocab) from a random offset, mod vocab
    gaps = ctx.randint(1, v // k, (t, k), shared=True)
    ids = (ctx.randint(0, v, (t, 1), shared=True) + gaps.cumsum(-1)) % v
    # teacher top-k log-probs: a peaked distribution holding 70-95% of the teacher's mass
    mass = 0.7 + 0.25 * ctx.rand(t, 1, shared=True)
    teacher_logprobs = ctx.randn(t, k, scale=2.0, shared=True).log_softmax(-1) + mass.log()
    return logits, teacher_logprobs, ids


def reference(logits, teacher_logprobs, teacher_ids):
    rank = dist.get_rank()
    v_local = logits.shape[1]
    z = logits.float()
    m = z.amax(-1)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    e = (z - m[:, None]).exp()
    local = teacher_ids - rank * v_local
    mine = (local >= 0) & (local < v_local)
    idx = local.clamp(0, v_local - 1)
    z_at = torch.where(mine, z.gather(1, idx), 0.0)
    sums = torch.cat([e.sum(-1, keepdim=True), z_at], dim=1)   # (tokens, 1 + k): one all-reduce
    dist.all_reduce(sums)
    lse = m + sums[:, 0].log()
    log_q = sums[:, 1:] - lse[:, None]
    p = teacher_logprobs.exp()
    kl = (p * (teacher_logprobs - log_q)).sum(-1)
    grad = e / sums[:, :1] * p.sum(-1, keepdim=True)
    grad = grad - torch.zeros_like(grad).scatter_add_(1, idx, p * mine)
    return kl, grad.to(torch.bfloat16)


def speed_of_light(size, world_size):
    t, v, k = size["tokens"], size["vocab"], size["topk"]
    frac = (world_size - 1) / world_size
    return {"link_bytes_per_rank": 2 * frac * t * 4 * (k + 2), "flops": 6 * t * v / world_size}  # per rank

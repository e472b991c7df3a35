"""Temperature sampling from a vocab-parallel LM head with the Gumbel-max trick, returning the sampled
token and its log-probability: vLLM's TP sampling path (LogitsProcessor gathers the vocab-parallel
logits, the Sampler draws with exponential/Gumbel noise from a seeded generator and computes logprobs).

The LM head is column-parallel over the vocabulary: rank r holds the logits of token ids
[r*V/ws, (r+1)*V/ws) for every sequence of the decode batch. Sampling at temperature T with Gumbel noise
g (drawn from a generator seeded identically on every rank, so every rank holds the same noise):

    logits   = all_gather(logits_shard) along the vocabulary      (B, V)
    token    = argmax_v (logits / T + g)                           a sample of softmax(logits / T)
    logprob  = log_softmax(logits / T)[token]

The straightforward implementation gathers the whole vocabulary; a faster one needs only a per-shard
max of logits / T + g with its index and the per-shard log-sum-exp.

Inputs per rank: logits (B, V/ws) fp32, its vocab slice; gumbel (B, V) fp32, replicated; temperature.
Outputs: token (B,) int64 (exact; inputs are continuous, so there are no ties) and logprob (B,) fp32
(fp32 defaults), identical on every rank.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "vocab_parallel_gumbel_sampling"
ID = 86
TITLE = "Vocab-parallel temperature sampling (Gumbel-max) with the sampled token's log-probability"
CATEGORY = "fused"
ORIGIN = "vLLM tensor-parallel sampling (LogitsProcessor vocab gather + Sampler Gumbel/exponential race, logprobs)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the vocabulary
# full: a decode batch of 256 sequences over Llama-3's 128256-token vocabulary
SIZES = {"screen": {"batch": 8, "vocab": 512}, "full": {"batch": 256, "vocab": 128256}}
OUTPUTS = [Output("token", torch.int64, shape=lambda s, n, r: (s["batch"],)),
           Output("logprob", torch.float32, shape=lambda s, n, r: (s["batch"],))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    logits = ctx.randn(s["batch"], s["vocab"] // n, scale=3.0)
    u = ctx.rand(s["batch"], s["vocab"], shared=True).clamp_min(1e-20)
    return logits, -torch.log(-torch.log(u)), 0.8


def reference(logits, gumbel, temperature):
    world = dist.get_world_size()
    b, v_local = logits.shape
    gathered = logits.new_empty(world, b, v_local)
    dist.all_gather_into_tensor(gathered, logits)
    scaled = gathered.permute(1, 0, 2).reshape(b, world * v_local) / temperature
    token = (scaled + gumbel).argmax(-1)
    logprob = scaled.log_softmax(-1).gather(1, token[:, None])[:, 0]
    return token, logprob


def speed_of_light(size, world_size):
    b, v = size["batch"], size["vocab"]
    return {"link_bytes_per_rank": (world_size - 1) * b * 16, "flops": 5 * b * v / world_size}

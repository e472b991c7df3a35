"""Speculative-decoding verification under tensor parallelism: draft tokens broadcast from rank 0,
greedy verification against vocab-parallel target logits, accepted lengths agreed on every rank
(vLLM / SGLang speculative decoding with a draft model on the first TP rank; Leviathan et al.,
"Fast Inference from Transformers via Speculative Decoding", greedy acceptance).

A small draft model runs on rank 0 and proposes K tokens per sequence. The target model scored the K
drafts plus one bonus position in one forward pass; its LM head is vocab-parallel, so rank r holds the
logits of token ids [r*V/ws, (r+1)*V/ws) for every sequence and position. Verification:

    drafts      = broadcast(draft_tokens, src=0)             (B, K) int64
    target[b,j] = argmax over the whole vocabulary of logits[b, j]   (a max + argmax across shards)
    accepted[b] = number of leading j < K with drafts[b, j] == target[b, j]
    tokens[b]   = drafts[b, :accepted], then target[b, accepted] (the correction or bonus token),
                  then -1 padding                            (B, K+1) int64

Every rank must return the same accepted lengths and tokens, so that all TP ranks append the same KV
entries. Inputs per rank: draft_tokens (B, K) int64 (only rank 0's is read; other ranks' are random, so
a solution that skips the broadcast fails) and logits (B, K+1, V/ws) fp32, its vocab slice (random
fp32, so argmax ties do not occur). The drafts agree with the target's argmax at about 80% of positions,
so accepted lengths spread over 0..K. Integer outputs: compared exactly.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "spec_decode_verify_vocab_parallel"
ID = 68
TITLE = "Speculative decoding: broadcast draft tokens, vocab-parallel greedy verification, agreed accepted lengths"
CATEGORY = "fused"
ORIGIN = "vLLM / SGLang speculative decoding (draft model on TP rank 0, greedy rejection over a vocab-parallel LM head)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the vocabulary
# full: a decode batch of 64 sequences, 4 drafts each, Llama-3's 128256-token vocabulary
SIZES = {"screen": {"batch": 8, "drafts": 4, "vocab": 256},
         "full": {"batch": 64, "drafts": 4, "vocab": 128256}}
OUTPUTS = [Output("accepted", torch.int64, shape=lambda s, n, r: (s["batch"],)),
           Output("tokens", torch.int64, shape=lambda s, n, r: (s["batch"], s["drafts"] + 1))]
AGREEMENT = 0.8  # probability that a draft token equals the target's greedy token


def make_inputs(ctx):
    s, n, r = ctx.size, ctx.world_size, ctx.rank
    b, k, v = s["batch"], s["drafts"], s["vocab"]
    logits = ctx.randn(b, k + 1, v, shared=True)
    shard = logits[..., r * v // n:(r + 1) * v // n].contiguous()
    guess = ctx.randint(0, v, (b, k))
    if r == 0:
        wrong = ctx.rand(b, k) >= AGREEMENT
        guess = torch.where(wrong, guess, logits[:, :k].argmax(-1))
    return guess, shard


def reference(draft_tokens, logits):
    world = dist.get_world_size()
    b, k1, v_local = logits.shape
    drafts = draft_tokens.clone()
    dist.broadcast(drafts, src=0)
    best, idx = logits.max(-1)                                      # per shard: (B, K+1)
    all_best = logits.new_empty(world, b, k1)
    all_idx = idx.new_empty(world, b, k1)
    dist.all_gather_into_tensor(all_best, best)
    dist.all_gather_into_tensor(all_idx, idx)
    owner = all_best.argmax(0, keepdim=True)
    target = all_idx.gather(0, owner)[0] + owner[0] * v_local      # global greedy token ids
    accepted = (drafts == target[:, :-1]).long().cumprod(1).sum(1)
    pos = torch.arange(k1, device=logits.device)
    padded = torch.cat([drafts, drafts.new_full((b, 1), -1)], 1)
    tokens = torch.where(pos < accepted[:, None], padded, -1)
    tokens = torch.where(pos == accepted[:, None], target, tokens)
    return accepted, tokens


def speed_of_light(size, world_size):
    b, k, v = size["batch"], size["drafts"], size["vocab"]
    return {"link_bytes_per_rank": b * k * 8 + (world_size - 1) * b * (k + 1) * 12,
            "flops": b * (k + 1) * v / world_size}

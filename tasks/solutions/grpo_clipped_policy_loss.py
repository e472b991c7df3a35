"""GRPO clipped policy loss with the group statistics and the token count in one one-shot all-reduce.

The reference issues two NCCL all-reduces (reward sums and squares; the token count) of a few hundred
bytes each: pure latency. Here the per-prompt sums, the sums of squares and the local token count
go into one cached symmetric buffer of 2*prompts+2 floats and are reduced by one one-shot kernel.
The count is split into a high and a low part below 2^12 so that it stays exact in fp32 (each part
sums exactly far beyond any realistic batch).
The clipped surrogate is computed with fewer passes: with a per-row advantage a,
min(ratio*a, clamp(ratio, 0.8, 1.28)*a) equals a*clamp(ratio, max=1.28) when a >= 0 and
a*clamp(ratio, min=0.8) when a < 0, so one clamp with per-row bounds replaces clamp, two multiplies
and a minimum, bit for bit.
Full size (64 prompts, 16 responses, 8192 tokens, 8 ranks): 1M tokens per rank (4 MiB per fp32
tensor), so the elementwise work is a few microseconds per pass and the two NCCL all-reduces
(~20 us each) dominate the reference's ~70 us; one one-shot (~7 us) and ~5 passes instead of ~9 bring
it to ~30 us: expect ~2x.
"""
import torch
import torch.distributed as dist

from tasks.solutions._symm import all_reduce_symmetric, symmetric_buffer

CLIP_LOW, CLIP_HIGH = 1 - 0.2, 1 + 0.28
COUNT_SPLIT = 4096  # token count = high * 4096 + low, each part exact in fp32 after the sum


def solution(logprobs, old_logprobs, rewards, mask, eps):
    prompts = rewards.shape[0]
    group = rewards.shape[1] * dist.get_world_size()
    stats, _ = symmetric_buffer((2 * prompts + 2,), torch.float32, rewards.device, tag="grpo_clipped_policy_loss")
    torch.sum(rewards, 1, out=stats[:prompts])
    torch.sum(rewards * rewards, 1, out=stats[prompts:2 * prompts])
    local_count = mask.sum()
    stats[2 * prompts:] = torch.stack([local_count // COUNT_SPLIT, local_count % COUNT_SPLIT])
    total = all_reduce_symmetric(stats)

    mean = total[:prompts] / group
    var = (total[prompts:2 * prompts] - group * mean * mean) / (group - 1)
    adv = (rewards - mean[:, None]) / (var.clamp_min(0).sqrt()[:, None] + eps)
    n_tokens = total[2 * prompts].long() * COUNT_SPLIT + total[2 * prompts + 1].long()

    a = adv[:, :, None]
    positive = a >= 0
    low = torch.where(positive, float("-inf"), CLIP_LOW)
    high = torch.where(positive, CLIP_HIGH, float("inf"))
    clipped = (logprobs - old_logprobs).exp_().clamp_(low, high)
    tok_loss = clipped.mul_(-a).mul_(mask)
    return adv, tok_loss, n_tokens

"""GRPO clipped policy loss with the group statistics and the token count in one one-shot all-reduce.

The reference issues two NCCL all-reduces (reward sums and squares; the token count) of a few hundred bytes
each: pure latency, each ~15-25 us on 8 H100/H200s. Here the per-prompt sums, the sums of squares and the
local token count go into one cached symmetric buffer of 2*prompts+2 floats and are reduced by one one-shot
kernel (~6-8 us). The count is split into a high and a low part below 2^12 so that it stays exact in fp32
(each part sums exactly far beyond any realistic batch). The surrogate itself is the reference's arithmetic.
Full size (64 prompts, 16 responses, 8192 tokens, 8 ranks): 1M tokens per rank, so the call is bound by
launches and latency, not bytes, and the solution spends more host time than the reference (buffer lookup, the
op's dispatch). At 8 ranks the two NCCL all-reduces cost ~40 us and the one-shot ~7 us, but the packing
launches more kernels (31 against the reference's 25 in pkb's trace, ~4 us each when launched eagerly), which
takes back most of the gain: expect ~0.9-1.0x (the H200 measurement, pkb's prediction and the earlier
estimate: docs/timing_model_log.md#from-the-docstrings). This file is mainly the example of packing small
reductions into one symmetric buffer.
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

    ratio = (logprobs - old_logprobs).exp()
    a = adv[:, :, None]
    tok_loss = -torch.minimum(ratio * a, ratio.clamp(CLIP_LOW, CLIP_HIGH) * a) * mask
    return adv, tok_loss, n_tokens

"""GRPO clipped importance-sampling policy loss with group-normalised advantages across data-parallel
ranks (NeMo-RL ClippedPGLossFn, verl/DAPO).

GRPO samples G responses per prompt and scores each against its group: A = (r - mean_G) / (std_G + eps)
(unbiased std). Here the G responses of each prompt are spread over the data-parallel ranks (rank r holds
responses [r*G/ws, (r+1)*G/ws) of every prompt), so the group statistics need an all-reduce. The
per-token loss is PPO's clipped surrogate with DAPO's asymmetric "clip-higher" range:

    ratio     = exp(logprobs - old_logprobs)
    tok_loss  = -min(ratio * A, clamp(ratio, 1 - 0.2, 1 + 0.28) * A) * mask
    n_tokens  = all_reduce_sum(mask.sum())            # token-level normalisation over the global batch

and the scalar loss is sum(tok_loss) / n_tokens (summed over ranks). The scalar itself is not an output:
in GRPO it is a sum of terms that cancel to about zero, so comparing it would test rounding. Its
well-conditioned parts are: the advantages, the masked per-token losses and the global token count.

Inputs per rank: logprobs, old_logprobs (prompts, G/ws, seq) fp32; rewards (prompts, G/ws) fp32 in
[0, 1); mask (prompts, G/ws, seq) bool (response tokens); eps (float).
Outputs: advantages (prompts, G/ws) fp32; tok_loss (prompts, G/ws, seq) fp32; n_tokens () int64.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "grpo_clipped_policy_loss"
ID = 27
TITLE = "GRPO clipped policy loss with group-normalised advantages across DP ranks"
CATEGORY = "fused"
ORIGIN = "NeMo-RL ClippedPGLossFn with GRPO advantages (DAPO clip-higher); verl compute_grpo_outcome_advantage"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=16)
# full: 64 prompts x 16 responses, 8192-token responses (GRPO on a reasoning model)
SIZES = {"screen": {"prompts": 8, "group": 16, "seq": 32},
         "full": {"prompts": 64, "group": 16, "seq": 8192}}
OUTPUTS = [Output("advantages", torch.float32, shape=lambda s, ws, r: (s["prompts"], s["group"] // ws)),
           Output("tok_loss", torch.float32, shape=lambda s, ws, r: (s["prompts"], s["group"] // ws, s["seq"])),
           Output("n_tokens", torch.int64, shape=lambda s, ws, r: ())]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    p, g, n = s["prompts"], s["group"] // ws, s["seq"]
    old = -3.0 * ctx.rand(p, g, n)                       # sampled tokens' log-probs under the old policy
    logprobs = old + ctx.randn(p, g, n, scale=0.2)        # the current policy has drifted
    rewards = ctx.rand(p, g)
    lengths = ctx.randint(n // 4, n + 1, (p, g, 1))
    mask = torch.arange(n, device=lengths.device) < lengths
    return logprobs, old, rewards, mask, 1e-6


def reference(logprobs, old_logprobs, rewards, mask, eps):
    group = rewards.shape[1] * dist.get_world_size()
    stats = torch.stack([rewards.sum(1), (rewards * rewards).sum(1)])  # (2, prompts)
    dist.all_reduce(stats)
    mean = stats[0] / group
    var = (stats[1] - group * mean * mean) / (group - 1)
    adv = (rewards - mean[:, None]) / (var.clamp_min(0).sqrt()[:, None] + eps)
    ratio = (logprobs - old_logprobs).exp()
    a = adv[:, :, None]
    tok_loss = -torch.minimum(ratio * a, ratio.clamp(1 - 0.2, 1 + 0.28) * a) * mask
    n_tokens = mask.sum()
    dist.all_reduce(n_tokens)
    return adv, tok_loss, n_tokens


def speed_of_light(size, world_size):
    p, g, n = size["prompts"], size["group"], size["seq"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * (2 * p * 4 + 8),
            "flops": 8 * p * g * n / world_size}  # per rank

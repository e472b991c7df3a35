"""Vocab-parallel cross entropy, forward and backward: Megatron-LM's _VocabParallelCrossEntropy.

The LM head is column-parallel over the vocabulary, so each tensor-parallel rank holds the logits of its
vocab slice for every token. The loss needs three reductions over the vocab shards, and the gradient
with respect to the logits reuses the softmax (Megatron saves it in forward; TE's parallel cross-entropy
kernel and Megatron's cross_entropy_loss_fusion compute both in one pass):

    m      = all_reduce_max(max_v z)                         # per token
    z_t    = all_reduce_sum(z[target] if target is local else 0)
    s      = all_reduce_sum(sum_v exp(z - m))
    loss   = log(s) + m - z_t
    dlogits = exp(z - m) / s - onehot(target)                 # d(sum of losses)/d(local logits)

Rank r owns vocab ids [r*V/ws, (r+1)*V/ws). All arithmetic is fp32 on bf16 logits.

Inputs per rank: logits (tokens, vocab/ws) bf16; target (tokens,) int64 in [0, vocab), identical on
all ranks.
Outputs: loss (tokens,) fp32, identical on all ranks; dlogits (tokens, vocab/ws) bf16.

Tolerance: dlogits holds probabilities of order 1/vocab, far below the bf16 default atol of 1e-2, so its
atol is 1e-12 (relative tolerance only, rtol 2e-2 as bf16); loss uses the fp32 default.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "vocab_parallel_cross_entropy"
ID = 25
TITLE = "Vocab-parallel cross entropy: loss and logits gradient"
CATEGORY = "fused"
ORIGIN = ("Megatron-LM tensor_parallel.vocab_parallel_cross_entropy (_VocabParallelCrossEntropy); "
          "TE parallel_cross_entropy")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)
# full: Llama-3 vocabulary (128256 = 8 * 16032), 8192 tokens
SIZES = {"screen": {"tokens": 32, "vocab": 256},
         "full": {"tokens": 8192, "vocab": 128256}}
OUTPUTS = [Output("loss", torch.float32, shape=lambda s, ws, r: (s["tokens"],)),
           Output("dlogits", torch.bfloat16, atol=1e-12, shape=lambda s, ws, r: (s["tokens"], s["vocab"] // ws))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    logits = ctx.randn(s["tokens"], s["vocab"] // ws, dtype=torch.bfloat16, scale=3.0)
    target = ctx.randint(0, s["vocab"], (s["tokens"],), shared=True)
    return logits, target


def reference(logits, target):
    rank = dist.get_rank()
    v_local = logits.shape[1]
    z = logits.float()
    m = z.amax(-1)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    z = z - m[:, None]
    local_t = target - rank * v_local
    mine = (local_t >= 0) & (local_t < v_local)
    idx = local_t.clamp(0, v_local - 1)
    z_t = torch.where(mine, z.gather(1, idx[:, None]).squeeze(1), torch.zeros_like(m))
    e = z.exp()
    sums = torch.stack([z_t, e.sum(-1)])  # (2, tokens)
    dist.all_reduce(sums)
    loss = sums[1].log() - sums[0]
    grad = e / sums[1][:, None]
    grad = grad - torch.zeros_like(grad).scatter_(1, idx[:, None], mine[:, None].float())
    return loss, grad.to(torch.bfloat16)


def speed_of_light(size, world_size):
    t, v = size["tokens"], size["vocab"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * 3 * t * 4,
            "flops": 6 * t * v / world_size}  # per rank

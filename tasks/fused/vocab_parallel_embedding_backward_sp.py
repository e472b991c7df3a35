"""Vocab-parallel embedding backward under sequence parallelism: all-gather of the sequence-sharded
output gradient, then accumulation of the rows this rank owns into its fp32 weight-gradient shard
(Megatron-LM VocabParallelEmbedding backward with sequence_parallel: the reverse of the forward's
reduce-scatter is an all-gather; the embedding's main_grad is fp32).

The embedding table is split by rows (vocabulary) over the tensor-parallel group: rank r owns token ids
[r*V/ws, (r+1)*V/ws). Every rank saw the same token ids in the forward pass. With sequence parallelism
the gradient reaching the embedding is split along the sequence, so each rank first gathers it, then
adds the gradient of every token whose id it owns into that id's row (tokens it does not own
contribute nothing):

    g                = all_gather(grad_out, seq)                   (S, B, D) bf16
    grad_weight[i]   = sum over positions p with ids[p] = r*V/ws + i of g[p]    in fp32

Inputs per rank: ids (S, B) int64, identical on all ranks, drawn so that ids repeat (a row collects
several tokens); grad_out (S/ws, B, D) bf16, this rank's positions; the vocabulary size V. Output:
grad_weight (V/ws, D) fp32. Tolerance: fp32 defaults (the sums are fp32 in any order; accumulating in
bf16 fails).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "vocab_parallel_embedding_backward_sp"
ID = 74
TITLE = "Vocab-parallel embedding backward with sequence parallelism: all-gather grads, fp32 row accumulation"
CATEGORY = "fused"
ORIGIN = "Megatron-LM VocabParallelEmbedding backward with sequence parallelism (all-gather, fp32 main_grad)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the vocabulary and the sequence
# full: Llama-3's 128256-token vocabulary, hidden 4096, 8192 tokens
SIZES = {"screen": {"seq": 64, "batch": 2, "hidden": 32, "vocab": 64},
         "full": {"seq": 8192, "batch": 1, "hidden": 4096, "vocab": 128256}}
OUTPUTS = [Output("grad_weight", torch.float32, shape=lambda s, n, r: (s["vocab"] // n, s["hidden"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    ids = ctx.randint(0, s["vocab"], (s["seq"], s["batch"]), shared=True)
    grad_out = ctx.randn(s["seq"] // n, s["batch"], s["hidden"], dtype=torch.bfloat16)
    return ids, grad_out, s["vocab"]


def reference(ids, grad_out, vocab):
    world, rank = dist.get_world_size(), dist.get_rank()
    sl, b, d = grad_out.shape
    g = grad_out.new_empty(world * sl, b, d)
    dist.all_gather_into_tensor(g, grad_out)
    rows = vocab // world
    local = ids - rank * rows
    owned = (local >= 0) & (local < rows)
    contrib = (g.float() * owned[..., None]).view(-1, d)
    grad_weight = torch.zeros(rows, d, device=g.device)
    return grad_weight.index_add_(0, torch.where(owned, local, 0).view(-1), contrib)


def speed_of_light(size, world_size):
    s, b, d = size["seq"], size["batch"], size["hidden"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * s * b * d * 2, "flops": s * b * d / world_size}

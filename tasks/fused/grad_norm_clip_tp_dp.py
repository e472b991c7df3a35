"""Global gradient-norm clipping over tensor- and data-parallel groups: Megatron-LM's
clip_grad_norm_fp32 / get_grad_norm_fp32 with a distributed optimizer.

The ranks form a 2-D grid: tensor-parallel groups of 2 consecutive ranks ([0, 1], [2, 3], ...) and
data-parallel groups of the ranks with the same TP index ([0, 2, 4, ...], [1, 3, ...]). With the
distributed optimizer every rank holds its DP shard of the gradients of its TP partition. Two kinds of
gradient exist: those of tensor-parallel weights (different on every rank) and those of parameters
replicated across TP (norm weights, biases), which the two ranks of a TP group hold identically; like
Megatron (param_is_not_tensor_parallel_duplicate), the replicated ones are counted only on TP rank 0.

    sq         = sum(g_tp^2) + (tp_rank == 0) * sum(g_rep^2)
    total_norm = sqrt(all_reduce over TP, then over DP, of sq)
    clip_coef  = min(max_norm / (total_norm + 1e-6), 1)
    outputs    = g_tp * clip_coef, g_rep * clip_coef, total_norm

Inputs per rank: g_tp (n_tp,) fp32; g_rep (n_rep,) fp32 (identical within a TP group); tp_group,
dp_group (built in make_inputs); max_norm (float).
Outputs: clipped g_tp, clipped g_rep (fp32, rtol 1e-4 and atol 0: the clipped values scale with
1/total_norm, so no absolute floor fits all sizes); total_norm () fp32.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "grad_norm_clip_tp_dp"
ID = 31
TITLE = "Gradient-norm clipping over TP x DP groups (TP-duplicate parameters counted once)"
CATEGORY = "fused"
ORIGIN = ("Megatron-LM optimizer/clip_grads.py get_grad_norm_fp32 / clip_grad_by_total_norm_fp32 (TP x DP, "
          "distributed optimizer)")
WORLD_SIZES = WorldSizes(min=2, multiple_of=2)
TP = 2
SIZES = {"screen": {"n_tp": 2048, "n_rep": 256},
         "full": {"n_tp": 2**28, "n_rep": 2**20}}  # full: 1 GiB of fp32 gradient shard per rank
OUTPUTS = [Output("g_tp", torch.float32, atol=0.0, shape=lambda s, ws, r: (s["n_tp"],)),
           Output("g_rep", torch.float32, atol=0.0, shape=lambda s, ws, r: (s["n_rep"],)),
           Output("total_norm", torch.float32, shape=lambda s, ws, r: ())]


def make_inputs(ctx):
    ws, rank = ctx.world_size, ctx.rank
    tp_group = dp_group = None
    for d in range(ws // TP):  # every rank creates every group, in the same order
        g = dist.new_group(list(range(d * TP, (d + 1) * TP)))
        if rank // TP == d:
            tp_group = g
    for t in range(TP):
        g = dist.new_group(list(range(t, ws, TP)))
        if rank % TP == t:
            dp_group = g
    # gradient scale chosen so that the global norm is about 3 (> max_norm) at every size: clipping is active
    scale = 3.0 / (ws * ctx.size["n_tp"]) ** 0.5
    g_tp = ctx.randn(ctx.size["n_tp"], scale=scale) * (0.5 + ctx.rand(1))
    # replicated-parameter gradients: the same within a TP group, different across DP ranks
    g_rep = ctx.randn(ws // TP, ctx.size["n_rep"], scale=scale, shared=True)[rank // TP]
    return g_tp, g_rep, tp_group, dp_group, 1.0


def reference(g_tp, g_rep, tp_group, dp_group, max_norm):
    sq = g_tp.square().sum()
    if dist.get_rank(tp_group) == 0:  # TP-duplicate gradients count once per TP group
        sq = sq + g_rep.square().sum()
    dist.all_reduce(sq, group=tp_group)
    dist.all_reduce(sq, group=dp_group)
    total_norm = sq.sqrt()
    clip_coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    return g_tp * clip_coef, g_rep * clip_coef, total_norm


def speed_of_light(size, world_size):
    n = size["n_tp"] + size["n_rep"]
    return {"link_bytes_per_rank": 8, "flops": 3 * n}  # per rank: latency-bound reductions of one scalar

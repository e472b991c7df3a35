"""One hybrid-sharded data-parallel (HSDP) training step, as PyTorch FSDP2 runs it on a 2-D device mesh
(fully_shard(mesh=(replicate, shard)); torchtitan's data_parallel_replicate x data_parallel_shard).

Mesh: replicate = 2 (outer), shard = ws / 2 (inner); rank = replica * (ws/2) + shard_rank. Parameters
are sharded within a shard group and replicated across the two replicas (typically: shard inside a
node, replicate across nodes). The groups are built in make_inputs.

The model is a stack of L residual layers without bias, h <- h + tanh(h @ W_l^T), W_l of shape (D, D),
with loss 0.5 * sum((h_L - y)^2) / B_local per rank (the global loss is the mean over ranks). Each
layer is its own FSDP unit and every parameter is sharded on dim 0 within the shard group: shard rank
s holds rows [s*D/S, (s+1)*D/S) of every W_l (S = ws/2), stacked as w_shard of shape (L, D/S, D), plus
the AdamW moments m, v of those rows (identical in both replicas). Every rank has its own batch. The step:

    forward   per layer: all-gather W_l over the shard group (the next layer's all-gather is
              prefetched), compute, free it (reshard_after_forward=True)
    backward  per layer, last to first: all-gather W_l again, compute the input and weight gradients,
              reduce-scatter the weight gradient over the shard group (average), then all-reduce the
              shard over the replicate group (average): the result is the mean over all ranks
    AdamW     (beta1 0.9, beta2 0.999, eps 1e-8, decoupled weight decay `wd`, bias correction with
              `step`) on the local shard

Returns (w_shard, m, v) after the step, each (L, D/S, D), identical in both replicas.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes, warm_up
from tasks.parallelism._fsdp import adamw, sharded_grads

SLUG = "hsdp_adamw_step"
ID = 55
TITLE = "HSDP step: all-gather within the shard group, reduce-scatter + cross-replica all-reduce, AdamW"
CATEGORY = "parallelism"
ORIGIN = "PyTorch FSDP2 HSDP (fully_shard on a (replicate, shard) DeviceMesh; torchtitan dp_replicate x dp_shard)"
WORLD_SIZES = WorldSizes(min=4, power_of_two=True)
REPLICATE = 2
SIZES = {
    "screen": {"batch": 16, "dim": 32, "layers": 3, "lr": 1e-2, "wd": 0.1, "step": 10, "g_scale": 2e-2},
    "full": {"batch": 2048, "dim": 2048, "layers": 8, "lr": 1e-2, "wd": 0.1, "step": 10, "g_scale": 5e-2},
}


def _shard_shape(s, n, r):
    return (s["layers"], s["dim"] // (n // REPLICATE), s["dim"])


OUTPUTS = [
    Output("w_shard", torch.float32, shape=_shard_shape),
    # m is signed, of the gradients' scale (~1e-2): an absolute floor of 1e-6 (1e-4 of its scale)
    Output("m", torch.float32, atol=1e-6, shape=_shard_shape),
    # v is positive and bounded away from zero: compared relatively
    Output("v", torch.float32, atol=1e-12, shape=_shard_shape),
]


def make_inputs(ctx):
    s = ctx.size
    d, layers, g = s["dim"], s["layers"], s["g_scale"]
    n = ctx.world_size // REPLICATE                  # shard group size
    shard_groups = [dist.new_group(list(range(i * n, (i + 1) * n))) for i in range(REPLICATE)]
    replicate_groups = [dist.new_group(list(range(j, ctx.world_size, n))) for j in range(n)]
    replica, sr = divmod(ctx.rank, n)
    x = ctx.randn(s["batch"], d)                     # this rank's slice of the batch
    y = ctx.randn(s["batch"], d)
    rows = slice(sr * d // n, (sr + 1) * d // n)
    w = ctx.randn(layers, d, d, scale=d ** -0.5, shared=True)
    w_shard = w[:, rows].contiguous()                # Shard(0) within the shard group
    m = ctx.randn(layers, d, d, scale=g, shared=True)[:, rows].contiguous()   # AdamW moments of those rows
    v = ((ctx.rand(layers, d, d, shared=True) + 0.5) * g * g)[:, rows].contiguous()
    warm_up([shard_groups[replica], replicate_groups[sr]], ctx.device)
    return (x, y, w_shard, m, v, s["lr"], s["wd"], s["step"], shard_groups[replica],
            replicate_groups[sr])


def reference(x, y, w_shard, m, v, lr, wd, step, shard_group, replicate_group):
    return adamw(w_shard, sharded_grads(x, y, w_shard, shard_group, replicate_group), m, v, lr, wd, step)


def speed_of_light(size, world_size):
    b, d, layers = size["batch"], size["dim"], size["layers"]
    n = world_size // REPLICATE
    nbytes = 4 * layers * d * d
    # two all-gathers and one reduce-scatter of every layer in the shard group, all-reduce of the shard
    return {"link_bytes_per_rank": 3 * (n - 1) / n * nbytes + 2 * (REPLICATE - 1) / REPLICATE * nbytes / n,
            "flops": 6 * b * d * d * layers}

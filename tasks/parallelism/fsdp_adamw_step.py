"""One fully sharded data-parallel training step, as PyTorch FSDP2 (fully_shard) runs it.

The model is a stack of L residual layers without bias, h <- h + tanh(h @ W_l^T), W_l of shape (D, D),
with loss 0.5 * sum((h_L - y)^2) / B_local per rank (the global loss is the mean over ranks). Each
layer is its own FSDP unit and every parameter is sharded on dim 0 (FSDP2's Shard(0)): rank r holds
rows [r*D/ws, (r+1)*D/ws) of every W_l, stacked as w_shard of shape (L, D/ws, D), plus the AdamW
moments m, v of those rows. The step:

    forward   per layer: all-gather W_l (the next layer's all-gather is prefetched), compute, free it
              (reshard_after_forward=True)
    backward  per layer, last to first: all-gather W_l again, compute the input and weight gradients,
              reduce-scatter the weight gradient (average over ranks) into this rank's rows
    AdamW     (beta1 0.9, beta2 0.999, eps 1e-8, decoupled weight decay `wd`, bias correction with
              `step`) on the local shard

Returns (w_shard, m, v) after the step, each (L, D/ws, D).
"""
import torch

from tasks.api import Output, WorldSizes
from tasks.parallelism._fsdp import adamw, sharded_grads

SLUG = "fsdp_adamw_step"
ID = 53
TITLE = "FSDP2 step: per-layer parameter all-gather (forward and backward), gradient reduce-scatter, AdamW"
CATEGORY = "parallelism"
ORIGIN = "PyTorch FSDP2 fully_shard (per-parameter Shard(0), reshard_after_forward, prefetch) + AdamW"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
SIZES = {
    "screen": {"batch": 16, "dim": 32, "layers": 3, "lr": 1e-2, "wd": 0.1, "step": 10, "g_scale": 2e-2},
    "full": {"batch": 2048, "dim": 2048, "layers": 8, "lr": 1e-2, "wd": 0.1, "step": 10, "g_scale": 5e-2},
}


def _shard_shape(s, n, r):
    return (s["layers"], s["dim"] // n, s["dim"])


OUTPUTS = [
    Output("w_shard", torch.float32, shape=_shard_shape),
    # m is signed, of the gradients' scale (~1e-2): an absolute floor of 1e-6 (1e-4 of its scale)
    Output("m", torch.float32, atol=1e-6, shape=_shard_shape),
    # v is positive and bounded away from zero: compared relatively
    Output("v", torch.float32, atol=1e-12, shape=_shard_shape),
]


def make_inputs(ctx):
    s = ctx.size
    n, d, layers, g = ctx.world_size, s["dim"], s["layers"], s["g_scale"]
    x = ctx.randn(s["batch"], d)                     # this rank's slice of the batch
    y = ctx.randn(s["batch"], d)
    w = ctx.randn(layers, d, d, scale=d ** -0.5, shared=True)
    rows = slice(ctx.rank * d // n, (ctx.rank + 1) * d // n)
    w_shard = w[:, rows].contiguous()                # FSDP2 Shard(0) of every layer's weight
    m = ctx.randn(layers, d // n, d, scale=g)        # AdamW moments of the local rows
    v = (ctx.rand(layers, d // n, d) + 0.5) * g * g
    return x, y, w_shard, m, v, s["lr"], s["wd"], s["step"]


def reference(x, y, w_shard, m, v, lr, wd, step):
    return adamw(w_shard, sharded_grads(x, y, w_shard), m, v, lr, wd, step)


def speed_of_light(size, world_size):
    b, d, layers = size["batch"], size["dim"], size["layers"]
    nbytes = 4 * layers * d * d
    # two all-gathers and one reduce-scatter of every layer
    return {"link_bytes_per_rank": 3 * (world_size - 1) / world_size * nbytes, "flops": 6 * b * d * d * layers}

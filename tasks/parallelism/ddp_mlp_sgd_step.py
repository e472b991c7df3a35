"""One data-parallel training step of a two-layer MLP, as PyTorch DistributedDataParallel runs it.

Every rank holds the same replica of the parameters (W1, b1, W2, b2) and its own slice of the global
batch (x, y). The step:

    forward   h = tanh(x @ W1^T + b1),  y_hat = h @ W2^T + b2
    loss      0.5 * sum((y_hat - y)^2) / B_local      (the global loss is the mean over ranks)
    backward  explicit gradients of the local loss
    DDP       the gradients are packed into one flat bucket in reverse registration order
              (b2, W2, b1, W1, as DDP's reducer fills buckets while backward runs), the bucket is
              divided by the world size and all-reduced (sum), i.e. averaged over ranks
    SGD       p <- p - lr * grad_avg

Returns the updated parameters (W1, b1, W2, b2), identical on every rank. A rank that skips the
all-reduce updates with its local gradient only and fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "ddp_mlp_sgd_step"
ID = 50
TITLE = "DDP training step: MLP forward/backward, bucketed gradient all-reduce, SGD update"
CATEGORY = "parallelism"
ORIGIN = "PyTorch DistributedDataParallel (Reducer gradient buckets, allreduce average) + torch.optim.SGD"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {
    "screen": {"batch": 16, "d_in": 32, "hidden": 64, "d_out": 32, "lr": 0.1},
    "full": {"batch": 4096, "d_in": 1024, "hidden": 4096, "d_out": 1024, "lr": 0.1},
}
OUTPUTS = [
    Output("w1", torch.float32, shape=lambda s, n, r: (s["hidden"], s["d_in"])),
    Output("b1", torch.float32, shape=lambda s, n, r: (s["hidden"],)),
    Output("w2", torch.float32, shape=lambda s, n, r: (s["d_out"], s["hidden"])),
    Output("b2", torch.float32, shape=lambda s, n, r: (s["d_out"],)),
]


def make_inputs(ctx):
    s = ctx.size
    x = ctx.randn(s["batch"], s["d_in"])                      # this rank's slice of the batch
    y = ctx.randn(s["batch"], s["d_out"])
    w1 = ctx.randn(s["hidden"], s["d_in"], scale=s["d_in"] ** -0.5, shared=True)  # replicated model
    b1 = ctx.randn(s["hidden"], scale=0.1, shared=True)
    w2 = ctx.randn(s["d_out"], s["hidden"], scale=s["hidden"] ** -0.5, shared=True)
    b2 = ctx.randn(s["d_out"], scale=0.1, shared=True)
    return x, y, w1, b1, w2, b2, s["lr"]


def reference(x, y, w1, b1, w2, b2, lr):
    world = dist.get_world_size()
    # forward
    h = torch.tanh(torch.addmm(b1, x, w1.t()))
    y_hat = torch.addmm(b2, h, w2.t())
    # backward of 0.5 * sum((y_hat - y)^2) / B_local
    g_out = (y_hat - y) / x.shape[0]
    g_w2 = g_out.t() @ h
    g_b2 = g_out.sum(0)
    g_pre = (g_out @ w2) * (1 - h * h)
    g_w1 = g_pre.t() @ x
    g_b1 = g_pre.sum(0)
    # DDP: one flat bucket in reverse registration order, pre-divided by the world size, all-reduced
    grads = (g_b2, g_w2, g_b1, g_w1)
    bucket = torch.cat([g.reshape(-1) for g in grads]).div_(world)
    dist.all_reduce(bucket)
    avg = {}
    off = 0
    for name, g in zip(("b2", "w2", "b1", "w1"), grads):
        avg[name] = bucket[off:off + g.numel()].view_as(g)
        off += g.numel()
    # SGD
    return (w1 - lr * avg["w1"], b1 - lr * avg["b1"], w2 - lr * avg["w2"], b2 - lr * avg["b2"])


def speed_of_light(size, world_size):
    b, di, hd, do = size["batch"], size["d_in"], size["hidden"], size["d_out"]
    nbytes = 4 * (hd * di + hd + do * hd + do)
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * nbytes,
            "flops": 6 * b * (di * hd + hd * do)}

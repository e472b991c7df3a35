"""One ZeRO stage-1 training step (optimizer state sharded), as DeepSpeed runs it.

The model is a two-layer MLP, h = tanh(x @ W1^T + b1), y_hat = h @ W2^T + b2, with loss
0.5 * sum((y_hat - y)^2) / B_local per rank (the global loss is the mean over ranks). Every rank holds
the full fp32 parameters and its own slice of the batch; the Adam state is partitioned.

Flat layout (DeepSpeed's flattened fp32 partition): flat = cat(W1.flatten(), b1, W2.flatten(), b2),
N elements, zero-padded to ws * S with S = ceil(N / ws); rank r owns flat[r*S:(r+1)*S], and m_shard,
v_shard are its Adam moments for exactly that slice. The step:

    forward/backward on the local batch -> full flat gradient
    reduce-scatter (average over ranks) -> this rank's gradient partition
    Adam (beta1 0.9, beta2 0.999, eps 1e-8, bias correction with `step`, no weight decay) on the
    owned slice of the parameters, updating m_shard and v_shard
    all-gather the updated partitions -> full updated parameters on every rank

Returns (W1, b1, W2, b2, m_shard, v_shard).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "zero1_adam_step"
ID = 51
TITLE = "ZeRO-1 step: gradient reduce-scatter, Adam on the owned partition, parameter all-gather"
CATEGORY = "parallelism"
ORIGIN = "DeepSpeed ZeRO stage 1 (stage_1_and_2.py: flat fp32 partitions, reduce-scatter, all-gather)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {
    "screen": {"batch": 16, "d_in": 32, "hidden": 64, "d_out": 32, "lr": 1e-2, "step": 10},
    "full": {"batch": 4096, "d_in": 1024, "hidden": 4096, "d_out": 1024, "lr": 1e-2, "step": 10},
}
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def _numel(s):
    return s["hidden"] * s["d_in"] + s["hidden"] + s["d_out"] * s["hidden"] + s["d_out"]


def _shard(s, n):
    return -(-_numel(s) // n)


OUTPUTS = [
    Output("w1", torch.float32, shape=lambda s, n, r: (s["hidden"], s["d_in"])),
    Output("b1", torch.float32, shape=lambda s, n, r: (s["hidden"],)),
    Output("w2", torch.float32, shape=lambda s, n, r: (s["d_out"], s["hidden"])),
    Output("b2", torch.float32, shape=lambda s, n, r: (s["d_out"],)),
    # m is signed and ~1e-2: an absolute floor of 1e-6 (1e-4 of its scale), not 1e-5
    Output("m_shard", torch.float32, atol=1e-6, shape=lambda s, n, r: (_shard(s, n),)),
    # v is positive and ~1e-4: compared relatively
    Output("v_shard", torch.float32, atol=1e-10, shape=lambda s, n, r: (_shard(s, n),)),
]


def make_inputs(ctx):
    s = ctx.size
    shard = _shard(s, ctx.world_size)
    x = ctx.randn(s["batch"], s["d_in"])
    y = ctx.randn(s["batch"], s["d_out"])
    w1 = ctx.randn(s["hidden"], s["d_in"], scale=s["d_in"] ** -0.5, shared=True)
    b1 = ctx.randn(s["hidden"], scale=0.1, shared=True)
    w2 = ctx.randn(s["d_out"], s["hidden"], scale=s["hidden"] ** -0.5, shared=True)
    b2 = ctx.randn(s["d_out"], scale=0.1, shared=True)
    m_shard = ctx.randn(shard, scale=1e-2)                 # Adam moments of this rank's partition
    v_shard = (ctx.rand(shard) + 0.5) * 1e-4
    return x, y, w1, b1, w2, b2, m_shard, v_shard, s["lr"], s["step"]


def reference(x, y, w1, b1, w2, b2, m_shard, v_shard, lr, step):
    world, rank = dist.get_world_size(), dist.get_rank()
    shard = m_shard.numel()
    params = (w1, b1, w2, b2)
    numel = sum(p.numel() for p in params)
    # forward / backward on the local batch
    h = torch.tanh(torch.addmm(b1, x, w1.t()))
    y_hat = torch.addmm(b2, h, w2.t())
    g_out = (y_hat - y) / x.shape[0]
    g_pre = (g_out @ w2) * (1 - h * h)
    grads = (g_pre.t() @ x, g_pre.sum(0), g_out.t() @ h, g_out.sum(0))
    flat_g = torch.zeros(world * shard, device=x.device)
    flat_g[:numel] = torch.cat([g.reshape(-1) for g in grads])
    # reduce-scatter the gradient: this rank keeps the average of its partition
    g = torch.empty(shard, device=x.device)
    dist.reduce_scatter_tensor(g, flat_g, op=dist.ReduceOp.AVG)
    # Adam on the owned partition of the fp32 parameters
    flat_p = torch.cat([p.reshape(-1) for p in params])
    lo, hi = rank * shard, min((rank + 1) * shard, numel)
    p = torch.zeros(shard, device=x.device)
    p[:max(hi - lo, 0)] = flat_p[lo:hi]
    m = BETA1 * m_shard + (1 - BETA1) * g
    v = BETA2 * v_shard + (1 - BETA2) * g * g
    m_hat = m / (1 - BETA1 ** step)
    v_hat = v / (1 - BETA2 ** step)
    p = p - lr * m_hat / (v_hat.sqrt() + EPS)
    # all-gather the updated partitions
    full = torch.empty(world * shard, device=x.device)
    dist.all_gather_into_tensor(full, p)
    out, off = [], 0
    for q in params:
        out.append(full[off:off + q.numel()].view_as(q))
        off += q.numel()
    return (*out, m, v)


def speed_of_light(size, world_size):
    b, di, hd, do = size["batch"], size["d_in"], size["hidden"], size["d_out"]
    nbytes = 4 * _numel(size)
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * nbytes,
            "flops": 6 * b * (di * hd + hd * do)}

"""One ZeRO stage-2 training step (gradients and optimizer state sharded), as DeepSpeed runs it.

The model is a two-layer MLP, h = tanh(x @ W1^T + b1), y_hat = h @ W2^T + b2, with loss
0.5 * sum((y_hat - y)^2) / B_local per rank (the global loss is the mean over ranks). Every rank holds
the full fp32 parameters and its own slice of the batch.

Flat layout (DeepSpeed's flattened fp32 partition): flat = cat(W1.flatten(), b1, W2.flatten(), b2),
N elements, zero-padded to ws * S with S = ceil(N / ws); rank r owns flat[r*S:(r+1)*S], and m_shard,
v_shard are its AdamW moments for exactly that slice. The step:

    backward runs layer 2 first: the (W2, b2) gradient bucket is reduced while the (W1, b1) gradients
    are computed; each bucket is pre-divided by the world size and every piece of it is summed onto
    the rank that owns that part of the flat partition (stage 2 keeps only the owned gradients)
    global gradient norm: sum of squares of the owned partitions, all-reduced; clip with
    coef = min(1, max_norm / (norm + 1e-6)) as torch.nn.utils.clip_grad_norm_
    AdamW (beta1 0.9, beta2 0.999, eps 1e-8, decoupled weight decay `wd`, bias correction with `step`)
    on the owned slice, updating m_shard and v_shard
    all-gather the updated partitions -> full updated parameters on every rank

Returns (W1, b1, W2, b2, m_shard, v_shard, grad_norm) where grad_norm is the unclipped global norm.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "zero2_adamw_clip_step"
ID = 52
TITLE = "ZeRO-2 step: bucketed gradient reduction to partition owners, global-norm clipping, AdamW, all-gather"
CATEGORY = "parallelism"
ORIGIN = "DeepSpeed ZeRO stage 2 (stage_1_and_2.py: partitioned gradients, overlap_comm buckets, clip_grad)"
WORLD_SIZES = WorldSizes(min=2)
# max_norm: the global gradient norm is ~7 (screen) and ~34 (full), so clipping is active (coef ~0.6)
SIZES = {
    "screen": {"batch": 16, "d_in": 32, "hidden": 64, "d_out": 32, "lr": 1e-2, "wd": 0.1, "step": 10,
               "max_norm": 4.0},
    "full": {"batch": 4096, "d_in": 1024, "hidden": 4096, "d_out": 1024, "lr": 1e-2, "wd": 0.1, "step": 10,
             "max_norm": 20.0},
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
    Output("grad_norm", torch.float32, shape=lambda s, n, r: ()),
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
    m_shard = ctx.randn(shard, scale=1e-2)                 # AdamW moments of this rank's partition
    v_shard = (ctx.rand(shard) + 0.5) * 1e-4
    return x, y, w1, b1, w2, b2, m_shard, v_shard, s["lr"], s["wd"], s["step"], s["max_norm"]


def _reduce_bucket(flat_g, lo, hi, shard, world):
    """Sum flat_g[lo:hi] (already pre-divided) onto the owners of its pieces; returns the async works."""
    works = []
    for owner in range(world):
        a, b = max(lo, owner * shard), min(hi, (owner + 1) * shard)
        if a < b:
            works.append(dist.reduce(flat_g[a:b], dst=owner, async_op=True))
    return works


def reference(x, y, w1, b1, w2, b2, m_shard, v_shard, lr, wd, step, max_norm):
    world, rank = dist.get_world_size(), dist.get_rank()
    shard = m_shard.numel()
    params = (w1, b1, w2, b2)
    numel = sum(p.numel() for p in params)
    off_w2 = w1.numel() + b1.numel()
    flat_g = torch.zeros(world * shard, device=x.device)
    # forward
    h = torch.tanh(torch.addmm(b1, x, w1.t()))
    y_hat = torch.addmm(b2, h, w2.t())
    # backward, layer 2: its bucket is reduced while layer 1's gradients are computed
    g_out = (y_hat - y) / (x.shape[0] * world)               # pre-divided by the world size
    flat_g[off_w2:off_w2 + w2.numel()].view_as(w2).copy_(g_out.t() @ h)
    flat_g[off_w2 + w2.numel():numel].copy_(g_out.sum(0))
    works = _reduce_bucket(flat_g, off_w2, numel, shard, world)
    # backward, layer 1
    g_pre = (g_out @ w2) * (1 - h * h)
    flat_g[:w1.numel()].view_as(w1).copy_(g_pre.t() @ x)
    flat_g[w1.numel():off_w2].copy_(g_pre.sum(0))
    works += _reduce_bucket(flat_g, 0, off_w2, shard, world)
    for w in works:
        w.wait()
    g = flat_g[rank * shard:(rank + 1) * shard]
    # global gradient norm over the partitions, clipping
    sq = (g * g).sum()
    dist.all_reduce(sq)
    norm = sq.sqrt()
    g = g * torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    # AdamW on the owned partition of the fp32 parameters
    flat_p = torch.cat([p.reshape(-1) for p in params])
    lo, hi = rank * shard, min((rank + 1) * shard, numel)
    p = torch.zeros(shard, device=x.device)
    p[:max(hi - lo, 0)] = flat_p[lo:hi]
    p = p * (1 - lr * wd)
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
    return (*out, m, v, norm)


def speed_of_light(size, world_size):
    b, di, hd, do = size["batch"], size["d_in"], size["hidden"], size["d_out"]
    nbytes = 4 * _numel(size)
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * nbytes,
            "flops": 6 * b * (di * hd + hd * do)}

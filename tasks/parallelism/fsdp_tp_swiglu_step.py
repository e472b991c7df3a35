"""One 2-D parallel training step of a SwiGLU feed-forward block: FSDP over data parallel x Megatron-style
tensor parallel, as torchtitan composes them (fully_shard over the dp mesh dim, parallelize_module with
ColwiseParallel w1/w3 and RowwiseParallel w2 over the tp mesh dim).

Mesh: tp = 2 (inner), dp = ws / 2; rank = dp_rank * 2 + tp_rank. The groups are built in make_inputs.
Model: out = (silu(x @ w1^T) * (x @ w3^T)) @ w2^T with w1, w3 of shape (F, D) and w2 of shape (D, F);
loss 0.5 * sum((out - y)^2) / B per dp rank (the global loss is the mean over dp ranks). Each tp rank
owns the column shard w1[t], w3[t] (F/2 rows) and the row shard w2[:, t] (F/2 columns); FSDP shards
each of those again on dim 0 over dp, so a rank holds w1_s, w3_s of shape (F/2/dp, D) and w2_s of shape
(D/dp, F/2), plus SGD momentum buffers of the same shapes. x and y are the dp rank's batch, identical
on both ranks of a tp group. The step:

    FSDP all-gather over dp (one packed all-gather of the three shards) -> the tp-local weights
    forward  a1 = x w1_t^T, a3 = x w3_t^T, h = silu(a1) * a3, partial = h w2_t^T, all-reduce over tp
    backward g = (out - y) / B; grads of w2_t, w1_t, w3_t (no input gradient is needed)
    FSDP reduce-scatter over dp (one packed reduce-scatter, average) -> gradient shards
    SGD with momentum: buf <- mu * buf + grad, p <- p - lr * buf

Returns (w1_s, w3_s, w2_s, buf_w1, buf_w3, buf_w2) after the step.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes, warm_up

SLUG = "fsdp_tp_swiglu_step"
ID = 54
TITLE = "2-D FSDP x TP step of a SwiGLU MLP: dp all-gather, tp all-reduce, dp reduce-scatter, momentum SGD"
CATEGORY = "parallelism"
ORIGIN = "torchtitan 2-D parallelism (FSDP2 fully_shard on dp x ColwiseParallel/RowwiseParallel on tp)"
WORLD_SIZES = WorldSizes(min=4, power_of_two=True)
TP = 2
SIZES = {
    "screen": {"batch": 16, "dim": 32, "ffn": 64, "lr": 0.1, "momentum": 0.9, "g_scale": 5e-2},
    "full": {"batch": 2048, "dim": 2048, "ffn": 8192, "lr": 0.1, "momentum": 0.9, "g_scale": 5e-3},
}


def _w13(s, n, r):
    return (s["ffn"] // TP // (n // TP), s["dim"])


def _w2(s, n, r):
    return (s["dim"] // (n // TP), s["ffn"] // TP)


OUTPUTS = [
    Output("w1_s", torch.float32, shape=_w13),
    Output("w3_s", torch.float32, shape=_w13),
    Output("w2_s", torch.float32, shape=_w2),
    # momentum buffers are signed, ~5e-3 (full) to ~1e-1 (screen): an absolute floor of 1e-7, not 1e-5
    Output("buf_w1", torch.float32, atol=1e-7, shape=_w13),
    Output("buf_w3", torch.float32, atol=1e-7, shape=_w13),
    Output("buf_w2", torch.float32, atol=1e-7, shape=_w2),
]


def make_inputs(ctx):
    s = ctx.size
    n, d, f, g = ctx.world_size, s["dim"], s["ffn"], s["g_scale"]
    dp = n // TP
    tp_groups = [dist.new_group(list(range(i * TP, (i + 1) * TP))) for i in range(dp)]
    dp_groups = [dist.new_group(list(range(j, n, TP))) for j in range(TP)]
    di, ti = divmod(ctx.rank, TP)
    b = s["batch"]
    x = ctx.randn(dp * b, d, shared=True)[di * b:(di + 1) * b]     # the dp rank's batch
    y = ctx.randn(dp * b, d, shared=True)[di * b:(di + 1) * b]

    def colwise(t):   # tp shard of rows, then FSDP shard of rows
        t = t.chunk(TP, 0)[ti]
        return t.chunk(dp, 0)[di].contiguous()

    def rowwise(t):   # tp shard of columns, then FSDP shard of rows
        t = t.chunk(TP, 1)[ti]
        return t.chunk(dp, 0)[di].contiguous()

    w1 = colwise(ctx.randn(f, d, scale=d ** -0.5, shared=True))
    w3 = colwise(ctx.randn(f, d, scale=d ** -0.5, shared=True))
    w2 = rowwise(ctx.randn(d, f, scale=f ** -0.5, shared=True))
    buf1 = colwise(ctx.randn(f, d, scale=g, shared=True))
    buf3 = colwise(ctx.randn(f, d, scale=g, shared=True))
    buf2 = rowwise(ctx.randn(d, f, scale=g, shared=True))
    warm_up([tp_groups[di], dp_groups[ti]], ctx.device)
    return (x, y, w1, w3, w2, buf1, buf3, buf2, s["lr"], s["momentum"], tp_groups[di], dp_groups[ti])


def reference(x, y, w1_s, w3_s, w2_s, buf_w1, buf_w3, buf_w2, lr, momentum, tp_group, dp_group):
    dp = dist.get_world_size(dp_group)
    shards = (w1_s, w3_s, w2_s)
    sizes = [t.numel() for t in shards]
    # FSDP: one packed all-gather of the module's shards over dp, then copy-out to tp-local weights
    packed = torch.empty(dp, sum(sizes), device=x.device)
    dist.all_gather_into_tensor(packed, torch.cat([t.reshape(-1) for t in shards]), group=dp_group)
    full = []
    for part, t in zip(packed.split(sizes, dim=1), shards):
        full.append(part.reshape(dp * t.shape[0], t.shape[1]))
    w1, w3, w2 = full
    # forward: colwise w1/w3, rowwise w2, all-reduce the partial output over tp
    a1 = x @ w1.t()
    a3 = x @ w3.t()
    s1 = F.silu(a1)
    h = s1 * a3
    out = h @ w2.t()
    dist.all_reduce(out, group=tp_group)
    # backward
    g = (out - y) / x.shape[0]
    g_w2 = g.t() @ h
    g_h = g @ w2
    sig = torch.sigmoid(a1)
    g_a1 = g_h * a3 * (sig * (1 + a1 * (1 - sig)))
    g_a3 = g_h * s1
    grads = (g_a1.t() @ x, g_a3.t() @ x, g_w2)
    # FSDP: one packed reduce-scatter (average) over dp
    send = torch.cat([gr.reshape(dp, -1) for gr in grads], dim=1)
    recv = torch.empty(sum(sizes), device=x.device)
    dist.reduce_scatter_tensor(recv, send, op=dist.ReduceOp.AVG, group=dp_group)
    g_shards = [part.view_as(t) for part, t in zip(recv.split(sizes), shards)]
    # SGD with momentum on the shards
    bufs = [momentum * b + gs for b, gs in zip((buf_w1, buf_w3, buf_w2), g_shards)]
    params = [p - lr * b for p, b in zip(shards, bufs)]
    return (*params, *bufs)


def speed_of_light(size, world_size):
    b, d, f = size["batch"], size["dim"], size["ffn"]
    dp = world_size // TP
    local = 3 * d * f // TP * 4          # tp-local weights, bytes
    return {"link_bytes_per_rank": 2 * (dp - 1) / dp * local + 2 * (TP - 1) / TP * b * d * 4,
            "flops": 6 * b * 3 * d * f // TP}

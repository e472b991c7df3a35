"""One training step's forward and backward passes through a pipeline with the 1F1B (one-forward-one-
backward, PipeDream-Flush) micro-batch schedule, as Megatron-LM runs it without interleaving.

Every rank is one pipeline stage s (ws stages): a residual MLP block h <- h + tanh(h @ W1^T) @ W2^T with
its own W1 (F, D) and W2 (D, F). Stage 0 holds the M input micro-batches x (M, mb, D); the last stage holds
the targets y (M, mb, D) (other ranks get None for those; act_shape = (M, mb, D)). The loss is
0.5 * sum((h_out - y)^2) / (M * mb) over all micro-batches. The schedule on stage s:

    warm-up     min(ws - s - 1, M) forward passes: receive the activation from stage s-1 (stage 0
                reads x), run the block, send the result to stage s+1
    steady      for each remaining micro-batch: forward one (the last stage computes the loss gradient
                (h_out - y) / (M * mb) right away), send its output and receive the gradient of the
                oldest in-flight micro-batch in one batch_isend_irecv, run that backward pass, send the
                input gradient to stage s-1 and receive the next activation in one batch_isend_irecv
    cool-down   the remaining backward passes, receiving gradients from stage s+1
    weight gradients are accumulated over the micro-batches; activations are kept until their backward

Returns this stage's (dW1, dW2).
"""
from collections import deque

import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "pipeline_1f1b_grads"
ID = 63
TITLE = "Pipeline-parallel 1F1B schedule: micro-batched forward/backward over stages with send/recv"
CATEGORY = "parallelism"
ORIGIN = "Megatron-LM forward_backward_pipelining_without_interleaving (PipeDream-Flush 1F1B)"
WORLD_SIZES = WorldSizes(min=2)
SIZES = {
    "screen": {"micro_batches": 8, "micro_batch": 4, "dim": 32, "ffn": 64},
    "full": {"micro_batches": 16, "micro_batch": 512, "dim": 1024, "ffn": 4096},
}
OUTPUTS = [Output("d_w1", torch.float32, shape=lambda s, n, r: (s["ffn"], s["dim"])),
           Output("d_w2", torch.float32, shape=lambda s, n, r: (s["dim"], s["ffn"]))]


def make_inputs(ctx):
    s = ctx.size
    n, r = ctx.world_size, ctx.rank
    m, mb, d, f = s["micro_batches"], s["micro_batch"], s["dim"], s["ffn"]
    w1 = ctx.randn(f, d, scale=d ** -0.5)                   # this stage's block
    w2 = ctx.randn(d, f, scale=f ** -0.5)
    x = ctx.randn(m, mb, d) if r == 0 else None             # first stage: the input micro-batches
    y = ctx.randn(m, mb, d) if r == n - 1 else None         # last stage: the targets
    return x, y, w1, w2, (m, mb, d)


def reference(x, y, w1, w2, act_shape):
    world, stage = dist.get_world_size(), dist.get_rank()
    first, last = stage == 0, stage == world - 1
    m_total = act_shape[0]
    dev = w1.device
    d_w1, d_w2 = torch.zeros_like(w1), torch.zeros_like(w2)
    saved = deque()
    n_fwd = 0

    def exchange(send=None, to=None, recv_from=None):
        ops, buf = [], None
        if send is not None:
            ops.append(dist.P2POp(dist.isend, send, to))
        if recv_from is not None:
            buf = torch.empty(act_shape[1:], device=dev)
            ops.append(dist.P2POp(dist.irecv, buf, recv_from))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
        return buf

    def recv_forward():
        return x[n_fwd] if first else exchange(recv_from=stage - 1)

    def forward(inp):
        nonlocal n_fwd
        t = torch.tanh(inp @ w1.t())
        out = inp + t @ w2.t()
        saved.append((inp, t, n_fwd))
        n_fwd += 1
        return out

    def backward(g):
        inp, t, _ = saved.popleft()
        d_w2.add_(g.t() @ t)
        g_pre = (g @ w2) * (1 - t * t)
        d_w1.add_(g_pre.t() @ inp)
        return g + g_pre @ w1

    def loss_grad(out):
        return (out - y[saved[-1][2]]) / (m_total * act_shape[1])

    warmup = min(world - stage - 1, m_total)
    for _ in range(warmup):
        out = forward(recv_forward())
        if not last:
            exchange(send=out, to=stage + 1)
    inp = recv_forward() if m_total > warmup else None
    for i in range(m_total - warmup):
        out = forward(inp)
        g = loss_grad(out) if last else exchange(send=out, to=stage + 1, recv_from=stage + 1)
        g_in = backward(g)
        if i == m_total - warmup - 1:
            if not first:
                exchange(send=g_in, to=stage - 1)
        elif first:
            inp = recv_forward()
        else:
            inp = exchange(send=g_in, to=stage - 1, recv_from=stage - 1)
    for _ in range(warmup):
        g_in = backward(exchange(recv_from=stage + 1))
        if not first:
            exchange(send=g_in, to=stage - 1)
    return d_w1, d_w2


def speed_of_light(size, world_size):
    m, mb, d, f = size["micro_batches"], size["micro_batch"], size["dim"], size["ffn"]
    return {"link_bytes_per_rank": 2 * 2 * m * mb * d * 4, "flops": m * 6 * mb * 2 * d * f}

"""Forward pass through an interleaved (virtual-stage) pipeline: every rank holds V model chunks, and
micro-batches travel around the ring of ranks V times (Megatron-LM
forward_backward_pipelining_with_interleaving with forward_only=True; Narayanan et al., "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM").

The model has V * ws stages; global stage g = c * ws + r is chunk c of rank r, a residual MLP block
h <- h + tanh(h @ W1^T) @ W2^T with that chunk's W1 (F, D), W2 (D, F). A micro-batch enters at rank 0,
chunk 0, goes through ranks 0..ws-1 (chunk 0), returns to rank 0 for chunk 1, and so on. Megatron's
interleaved order: micro-batches are taken in groups of ws, and each rank runs chunk 0 on a group, then
chunk 1 on the same group, ..., before the next group. In time steps: rank r starts at step r, and its
j-th unit of work is chunk (j // ws) % V of micro-batch (j // (ws V)) * ws + j % ws; every activation it
sends is consumed by the next rank (rank ws-1 -> rank 0 for the next chunk) one step later, so each step
is one ring exchange (send to r+1, receive from r-1, batched).

Inputs per rank: x (M, mb, D) fp32, the micro-batches (only rank 0's is read; the others are random, so
skipping the transfers fails); w1 (V, F, D) and w2 (V, D, F) fp32, this rank's chunks. Output: the
activations leaving this rank's last chunk for every micro-batch, (M, mb, D) fp32 (on rank ws-1 the
model's output). Tolerance: fp32 defaults.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "pipeline_interleaved_forward"
ID = 80
TITLE = "Interleaved pipeline forward: virtual stages per rank, micro-batch groups, ring send/recv each step"
CATEGORY = "parallelism"
ORIGIN = "Megatron-LM forward_backward_pipelining_with_interleaving (virtual pipeline stages), forward_only"
WORLD_SIZES = WorldSizes(min=2, max=8, power_of_two=True)  # ws divides the micro-batch count (8 at screen size)
SIZES = {"screen": {"micro_batches": 8, "micro_batch": 4, "dim": 16, "ffn": 32, "chunks": 2},
         "full": {"micro_batches": 16, "micro_batch": 2048, "dim": 4096, "ffn": 16384, "chunks": 2}}
OUTPUTS = [Output("out", torch.float32, shape=lambda s, n, r: (s["micro_batches"], s["micro_batch"], s["dim"]))]


def make_inputs(ctx):
    s = ctx.size
    v, d, f = s["chunks"], s["dim"], s["ffn"]
    x = ctx.randn(s["micro_batches"], s["micro_batch"], d)
    w1 = ctx.randn(v, f, d, scale=d ** -0.5)
    w2 = ctx.randn(v, d, f, scale=f ** -0.5)
    return x, w1, w2


def reference(x, w1, w2):
    world, rank = dist.get_world_size(), dist.get_rank()
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    chunks, micro = w1.shape[0], x.shape[0]
    units = micro * chunks

    def unit(j):
        """(chunk, micro-batch) of this rank's j-th unit of work."""
        return (j // world) % chunks, (j // (world * chunks)) * world + j % world

    out = torch.empty_like(x)
    inbox = None
    for step in range(units + world - 1):
        j = step - rank
        h = None
        if 0 <= j < units:
            c, m = unit(j)
            h = x[m] if rank == 0 and c == 0 else inbox
            h = h + torch.tanh(h @ w1[c].t()) @ w2[c].t()
            if c == chunks - 1:
                out[m] = h
        ops = []
        if h is not None and not (rank == world - 1 and c == chunks - 1):
            ops.append(dist.P2POp(dist.isend, h, nxt))
        if 0 <= j + 1 < units and not (rank == 0 and unit(j + 1)[0] == 0):
            inbox = torch.empty_like(x[0])
            ops.append(dist.P2POp(dist.irecv, inbox, prv))
        if ops:
            for req in dist.batch_isend_irecv(ops):
                req.wait()
    return out


def speed_of_light(size, world_size):
    m, b, d, f, v = size["micro_batches"], size["micro_batch"], size["dim"], size["ffn"], size["chunks"]
    return {"link_bytes_per_rank": v * m * b * d * 4, "flops": 4 * v * m * b * d * f}

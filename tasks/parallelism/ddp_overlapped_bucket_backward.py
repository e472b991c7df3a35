"""Backward pass of a deep MLP with DDP's gradient bucketing and communication/computation overlap:
PyTorch DistributedDataParallel's Reducer (bucket_cap_mb, asynchronous all-reduce per ready bucket).

Every rank holds the same replica of L residual layers h <- h + tanh(h @ W_l^T + b_l) (W_l (D, D),
b_l (D)) and its own micro-batch x, y (B, D); the local loss is 0.5 * sum((h_L - y)^2) / B and the global
loss is its mean over ranks. Backward produces gradients from the last layer to the first; DDP's buckets
hold parameters in reverse registration order (b_{L-1}, W_{L-1}, b_{L-2}, ...). As soon as a bucket is
full (its gradients reach bucket_cap_bytes) it is flattened and all-reduced (average) asynchronously
while backward continues with earlier layers; after the last layer the remaining bucket is reduced,
every reduction is waited for and the averaged gradients are copied back out of the flat buckets.

Inputs per rank: x, y (B, D) fp32, this rank's data; w (L, D, D), b (L, D) fp32, replicated; the bucket
capacity in bytes. Outputs: grad_w (L, D, D) and grad_b (L, D) fp32, the gradients averaged over ranks,
identical everywhere. Tolerance: fp32 defaults (the average is an fp32 sum in any order).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "ddp_overlapped_bucket_backward"
ID = 71
TITLE = "DDP backward with gradient buckets all-reduced asynchronously while backward continues"
CATEGORY = "parallelism"
ORIGIN = "PyTorch DistributedDataParallel Reducer (bucket_cap_mb buckets, async allreduce overlapped with backward)"
WORLD_SIZES = WorldSizes(min=2)
# screen: 6 layers of 32 (4.2 KiB of weight gradient each) in 10 KiB buckets; full: 16 layers of 2048
# (268 MiB of gradients) in DDP's default 25 MiB buckets, batch 4096 per rank
SIZES = {"screen": {"layers": 6, "dim": 32, "batch": 16, "bucket_cap_bytes": 10 * 1024},
         "full": {"layers": 16, "dim": 2048, "batch": 4096, "bucket_cap_bytes": 25 * 2**20}}
OUTPUTS = [Output("grad_w", torch.float32, shape=lambda s, n, r: (s["layers"], s["dim"], s["dim"])),
           Output("grad_b", torch.float32, shape=lambda s, n, r: (s["layers"], s["dim"]))]


def make_inputs(ctx):
    s = ctx.size
    l, d = s["layers"], s["dim"]
    x = ctx.randn(s["batch"], d)
    y = ctx.randn(s["batch"], d)
    w = ctx.randn(l, d, d, scale=d ** -0.5, shared=True)
    b = ctx.randn(l, d, scale=0.1, shared=True)
    return x, y, w, b, s["bucket_cap_bytes"]


def reference(x, y, w, b, bucket_cap_bytes):
    layers = w.shape[0]
    hs, ts = [x], []
    for layer in range(layers):
        ts.append(torch.tanh(torch.addmm(b[layer], hs[-1], w[layer].t())))
        hs.append(hs[-1] + ts[-1])
    grad_w, grad_b = torch.empty_like(w), torch.empty_like(b)
    pending, bucket, nbytes = [], [], 0

    def launch(members):
        """Flatten a full bucket and start its all-reduce; backward goes on while it runs."""
        flat = torch.cat([grad.reshape(-1) for _, grad in members])
        pending.append((flat, members, dist.all_reduce(flat, op=dist.ReduceOp.AVG, async_op=True)))

    g = (hs[-1] - y) / x.shape[0]
    for layer in reversed(range(layers)):
        g_pre = g * (1 - ts[layer] * ts[layer])
        for dst, grad in ((grad_b[layer], g_pre.sum(0)), (grad_w[layer], g_pre.t() @ hs[layer])):
            bucket.append((dst, grad))
            nbytes += grad.numel() * grad.element_size()
            if nbytes >= bucket_cap_bytes:
                launch(bucket)
                bucket, nbytes = [], 0
        if layer > 0:
            g = g + g_pre @ w[layer]
    if bucket:
        launch(bucket)
    for flat, members, work in pending:
        work.wait()
        for (dst, _), part in zip(members, flat.split([grad.numel() for _, grad in members])):
            dst.copy_(part.view_as(dst))
    return grad_w, grad_b


def speed_of_light(size, world_size):
    l, d, bt = size["layers"], size["dim"], size["batch"]
    nbytes = 4 * l * (d * d + d)
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * nbytes, "flops": 6 * l * bt * d * d}

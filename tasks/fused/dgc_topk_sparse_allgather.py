"""Top-k sparsified gradient exchange with momentum correction: Deep Gradient Compression (Lin et al.,
"Deep Gradient Compression", ICLR 2018; Horovod/GRACE DGC compressor with all-gather of (index, value)
pairs).

Instead of all-reducing a dense gradient, every data-parallel rank sends only its k largest accumulated
entries. Momentum correction and local accumulation keep the unsent part for later steps, and momentum
factor masking clears what was sent:

    u'      = momentum * u + grad                 momentum buffer (momentum correction)
    v'      = v + u'                              local accumulation of what has not been sent
    idx     = the k indices of largest |v'|       values = v'[idx]
    gather  (idx, values) from every rank         all-gather of k int64 indices and k fp32 values
    dense   = sum over ranks of the scattered values / ws   (a duplicate index adds up)
    u'[idx] = 0, v'[idx] = 0                       momentum factor masking

Inputs per rank: grad, u, v (n,) fp32, its own (gradients of its micro-batch and its buffers); the
momentum; k. Outputs: dense (n,) fp32, the averaged sparse gradient, identical on all ranks; u', v' (n,)
fp32. Tolerance: fp32 defaults. Inputs are continuous random values, so the top-k set has no ties.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "dgc_topk_sparse_allgather"
ID = 79
TITLE = "Deep Gradient Compression: momentum-corrected top-k, all-gather of (index, value), dense average"
CATEGORY = "fused"
ORIGIN = "Deep Gradient Compression (Lin et al. 2018), Horovod/GRACE DGC compressor (all-gather of sparse pairs)"
WORLD_SIZES = WorldSizes(min=2)
# full: a 64 M-parameter gradient (256 MiB fp32), 0.1% density as in the DGC paper
SIZES = {"screen": {"n": 4096, "k": 64}, "full": {"n": 64 * 2**20, "k": 65536}}
_flat = lambda s, ws, r: (s["n"],)  # noqa: E731
OUTPUTS = [Output(name, torch.float32, shape=_flat) for name in ("dense", "u", "v")]


def make_inputs(ctx):
    n = ctx.size["n"]
    return ctx.randn(n), ctx.randn(n, scale=0.5), ctx.randn(n, scale=0.5), 0.9, ctx.size["k"]


def reference(grad, u, v, momentum, k):
    world = dist.get_world_size()
    u = momentum * u + grad
    v = v + u
    idx = v.abs().topk(k).indices
    all_idx = idx.new_empty(world * k)
    all_vals = v.new_empty(world * k)
    dist.all_gather_into_tensor(all_idx, idx)
    dist.all_gather_into_tensor(all_vals, v[idx])
    dense = torch.zeros_like(v).index_add_(0, all_idx, all_vals) / world
    return dense, u.index_fill(0, idx, 0.0), v.index_fill(0, idx, 0.0)


def speed_of_light(size, world_size):
    n, k = size["n"], size["k"]
    return {"link_bytes_per_rank": (world_size - 1) * k * 12, "flops": 4 * n}

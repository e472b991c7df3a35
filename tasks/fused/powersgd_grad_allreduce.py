"""PowerSGD gradient compression with error feedback: PyTorch DDP's powerSGD_hook (Vogels et al.,
"PowerSGD: Practical Low-Rank Gradient Compression for Distributed Optimization").

Instead of all-reducing a gradient matrix M (n x m), every rank all-reduces two thin factors of one power
iteration. With error feedback the residual the compression missed is added to the next gradient. Per
rank (fp32):

    M      = grad + error                       # error feedback
    P      = M @ Q                              # (n, r); Q (m, r) is the same on all ranks
    P      = all_reduce_sum(P), then orthonormalise its columns in order (Gram-Schmidt or QR)
    Qn     = all_reduce_sum(M.T @ P) / world_size
    approx = P @ Qn.T                           # the compressed mean gradient, identical on all ranks
    error' = M - approx

approx and error' do not depend on the orthonormalisation's column signs, so Gram-Schmidt (the
reference, as the hook does for rank <= 2) and Householder QR (the hook for larger ranks) agree.

Inputs per rank: grad (n, m) fp32 (a shared low-rank signal plus per-rank noise); error (n, m) fp32;
q (m, r) fp32, identical on all ranks (the hook seeds it identically).
Outputs: approx (n, m) fp32, identical on all ranks; error' (n, m) fp32.

Tolerance: rtol = atol = 1e-3 on these O(1) outputs. Every element of approx goes through two fp32
reductions of length n and m (one of them across ranks), so fp32 implementations that differ only in
summation order (or use QR instead of Gram-Schmidt) differ by up to ~1e-4 at full size; bf16 rounding
(2^-9 relative) still fails.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "powersgd_grad_allreduce"
ID = 40
TITLE = "PowerSGD low-rank gradient all-reduce with error feedback"
CATEGORY = "fused"
ORIGIN = ("PyTorch DDP comm hook torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook "
          "(PowerSGD, Vogels et al. 2019)")
WORLD_SIZES = WorldSizes(min=2)
# full: one 8192 x 8192 weight's gradient (256 MiB fp32) compressed to rank 4
SIZES = {"screen": {"rows": 64, "cols": 32, "rank": 4},
         "full": {"rows": 8192, "cols": 8192, "rank": 4}}
_shape = lambda s, ws, r: (s["rows"], s["cols"])  # noqa: E731
OUTPUTS = [Output("approx", torch.float32, rtol=1e-3, atol=1e-3, shape=_shape),
           Output("error", torch.float32, rtol=1e-3, atol=1e-3, shape=_shape)]


def make_inputs(ctx):
    s = ctx.size
    n, m, r = s["rows"], s["cols"], s["rank"]
    u = ctx.randn(n, 2 * r, shared=True)
    v = ctx.randn(m, 2 * r, shared=True) * torch.linspace(1.0, 0.1, 2 * r, device=u.device)
    grad = (u * (1.0 + 0.3 * ctx.randn(1, 2 * r))) @ v.t() + ctx.randn(n, m, scale=0.5)
    error = ctx.randn(n, m, scale=0.3)
    q = ctx.randn(m, r, shared=True)
    return grad, error, q


def reference(grad, error, q):
    ws = dist.get_world_size()
    m = grad + error
    p = m @ q
    dist.all_reduce(p)
    cols = []
    for i in range(p.shape[1]):  # Gram-Schmidt, column by column
        c = p[:, i]
        for prev in cols:
            c = c - (prev * c).sum() * prev
        cols.append(c / c.norm())
    p = torch.stack(cols, dim=1)
    qn = m.t() @ p
    dist.all_reduce(qn)
    approx = p @ (qn / ws).t()
    return approx, m - approx


def speed_of_light(size, world_size):
    n, m, r = size["rows"], size["cols"], size["rank"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * (n + m) * r * 4,
            "flops": 6 * n * m * r}  # per rank

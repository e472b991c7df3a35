"""Distributed PCA by subspace (block power) iteration over row-partitioned data: the pattern of Spark
MLlib's RowMatrix.computePrincipalComponents / computeSVD, whose every iteration aggregates
Gramian-times-block products X^T (X V) over the partitions, here with an all-reduce.

Rank r holds n rows of the global data matrix, x (n, d) fp32 (N = ws*n rows in all), and every rank holds
the same starting block v0 (d, k). The reference:

  1. centres the data with the global column mean (all-reduce of column sums);
  2. `iters` times: Y = sum over ranks of Xc_r^T (Xc_r V) (all-reduce), V = orthonormal factor of Y (QR,
     each column's sign fixed so that R's diagonal is positive, which makes it unique);
  3. explained variance: lambda_i = v_i^T (sum over ranks of Xc_r^T Xc_r v_i) / (N - 1) (one more
     all-reduced product);
  4. projects its own rows: scores = Xc_r V.

The data have a planted spectrum (k well-separated directions over isotropic noise) and a different mean
shift per rank, so V converges quickly and depends on every rank's rows.
Outputs: components V (d, k) and variance (k,), identical on every rank; scores (n, k), this rank's rows.
Tolerance: rtol 1e-4, atol 1e-4 (components are O(d^-1/2) and scores O(1-10); the sums over N rows and the
QR run in an order the implementation chooses, and the iteration damps those differences).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "distributed_pca_subspace_iteration"
ID = 131
TITLE = "Distributed PCA: all-reduced Gramian-block products, QR subspace iteration, projection"
CATEGORY = "application"
ORIGIN = "Spark MLlib RowMatrix.computePrincipalComponents / computeSVD (distributed Gramian products)"
WORLD_SIZES = WorldSizes(min=2)
# full: 256K rows of 1024 features per GPU (2M rows in all), 16 components
SIZES = {"screen": {"rows": 128, "features": 32, "components": 4, "iters": 6},
         "full": {"rows": 2**18, "features": 1024, "components": 16, "iters": 6}}
OUTPUTS = [Output("components", torch.float32, atol=1e-4, shape=lambda s, ws, r: (s["features"], s["components"])),
           Output("variance", torch.float32, atol=1e-4, shape=lambda s, ws, r: (s["components"],)),
           Output("scores", torch.float32, atol=1e-4, shape=lambda s, ws, r: (s["rows"], s["components"]))]


def make_inputs(ctx):
    s = ctx.size
    n, d, k = s["rows"], s["features"], s["components"]
    basis = torch.linalg.qr(ctx.randn(d, k, shared=True)).Q                 # planted directions
    strength = 6.0 * 0.8 ** torch.arange(k, device=ctx.device)             # 6, 4.8, 3.84, ...
    x = (ctx.randn(n, k) * strength) @ basis.T + ctx.randn(n, d) + ctx.randn(1, d)
    return x, ctx.randn(d, k, shared=True), s["iters"]


def _gram_times(xc, v):
    y = xc.T @ (xc @ v)
    dist.all_reduce(y)
    return y


def _orthonormal(y):
    q, r = torch.linalg.qr(y)
    return q * torch.sign(torch.diagonal(r))


def reference(x, v0, iters):
    n_total = x.shape[0] * dist.get_world_size()
    mean = x.sum(0)
    dist.all_reduce(mean)
    xc = x - mean / n_total
    v = _orthonormal(v0)
    for _ in range(iters):
        v = _orthonormal(_gram_times(xc, v))
    variance = (v * _gram_times(xc, v)).sum(0) / (n_total - 1)
    return v, variance, xc @ v


def speed_of_light(size, world_size):
    n, d, k, it = size["rows"], size["features"], size["components"], size["iters"]
    return {"link_bytes_per_rank": (it + 1) * 2 * (world_size - 1) / world_size * d * k * 4,
            "flops": (it + 1) * 4 * n * d * k + 2 * n * d * k}

"""Muon update under tensor parallelism: momentum, then Newton-Schulz orthogonalisation of a weight
matrix whose rows are sharded over the tensor-parallel group (Muon; Moonlight's distributed Muon).

Muon orthogonalises each 2-D update with a quintic Newton-Schulz iteration. A column-parallel weight is
split by output rows over the TP group, but the orthogonalisation acts on the whole matrix, so the
shards must be combined: gather the matrix (Moonlight / Megatron-Core distributed Muon), or compute the
Gram matrices from the shards and all-reduce them (the PKB tp_muon problem). Per rank, with the
momentum update of Keller Jordan's Muon (Nesterov) and Moonlight's update scale:

    buf' = lerp(buf, g, 1 - mu)                     # this rank's rows, fp32
    u    = lerp(g, buf', mu)
    U    = rows of u gathered from all ranks        # (M, N), M = rows
    X    = U^T if M > N else U;  X = X / (||X||_F + 1e-7)
    5 times:  A = X X^T;  B = b A + c A A;  X = a X + B X      (a, b, c) = (3.4445, -4.7750, 2.0315)
    O    = X^T if M > N else X
    update = (0.2 * sqrt(max(M, N)) * O)[this rank's rows].to(bf16)

The iteration runs in fp32 here: in bf16 it is not reproducible to bf16 tolerance across implementations
(different accumulation orders drift by several percent after five steps); fp32 or TF32 matmuls pass.

Inputs per rank: grad, momentum (M/ws, N) fp32 (rank r holds rows [r*M/ws, (r+1)*M/ws)); mu (float).
Outputs: momentum' (M/ws, N) fp32; update (M/ws, N) bf16.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "muon_newton_schulz_tp"
ID = 36
TITLE = "Muon momentum + Newton-Schulz orthogonalisation of a TP-sharded matrix"
CATEGORY = "fused"
ORIGIN = ("Muon (Keller Jordan) zeropower_via_newtonschulz5; "
          "Moonlight distributed Muon (update scale 0.2*sqrt(max(M,N))) under TP")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True)
# full: Llama-3-8B MLP up-projection (14336 x 4096), column-parallel over 8 ranks
SIZES = {"screen": {"rows": 128, "cols": 64}, "full": {"rows": 14336, "cols": 4096}}
OUTPUTS = [Output("momentum", torch.float32, shape=lambda s, ws, r: (s["rows"] // ws, s["cols"])),
           Output("update", torch.bfloat16, shape=lambda s, ws, r: (s["rows"] // ws, s["cols"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    m, n = s["rows"] // ws, s["cols"]
    grad = ctx.randn(m, n) * (0.5 + ctx.rand(m, 1))   # rows of different scale: a non-trivial spectrum
    momentum = ctx.randn(m, n) * (0.5 + ctx.rand(m, 1))
    return grad, momentum, 0.95


def reference(grad, momentum, mu):
    ws, rank = dist.get_world_size(), dist.get_rank()
    buf = momentum.lerp(grad, 1 - mu)
    u = grad.lerp(buf, mu)
    m_local, n = u.shape
    full = torch.empty(ws * m_local, n, dtype=u.dtype, device=u.device)
    dist.all_gather_into_tensor(full, u)
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = full.shape[0] > full.shape[1]
    x = full.t() if tall else full
    x = x / (x.norm() + 1e-7)
    for _ in range(5):
        gram = x @ x.t()
        x = a * x + (b * gram + c * gram @ gram) @ x
    o = x.t() if tall else x
    update = 0.2 * max(full.shape) ** 0.5 * o[rank * m_local:(rank + 1) * m_local]
    return buf, update.to(torch.bfloat16)


def speed_of_light(size, world_size):
    m, n = size["rows"], size["cols"]
    small, big = min(m, n), max(m, n)
    # per rank, with the work split: the two (small x big) products sharded, the small^3 one shared out
    per_step = (2 * 2 * small * small * big + 2 * small ** 3) / world_size
    frac = (world_size - 1) / world_size
    gather = frac * m * n * 4                           # gather the matrix once
    gram_allreduce = 2 * frac * small * small * 4 * 5    # or all-reduce a Gram matrix per step
    return {"link_bytes_per_rank": min(gather, gram_allreduce), "flops": 5 * per_step}  # lower bounds

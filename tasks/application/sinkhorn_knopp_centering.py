"""Distributed Sinkhorn-Knopp centering of teacher outputs: the batch-wide equipartition step of SwAV and
DINOv2 (SinkhornKnoppTeacher), where the batch is split across data-parallel ranks.

Each rank holds the teacher scores of its B samples over K prototypes, scores (B, K) fp32. With the
global batch N = ws*B, the transport plan Q = exp(scores / temperature) (a K x N matrix, its columns
spread over the ranks) is scaled to have equal row sums (every prototype used equally over the global
batch) and equal column sums (every sample a distribution):

    Q /= sum(Q)                                  all-reduce of the local sum (a scale that keeps Q in
                                                 range; it cancels in the first row step)
    repeat n_iters times:
        Q /= row sums of Q, then Q /= K          row sums all-reduced (they run over the whole batch)
        Q /= column sums of Q, then Q /= N       column sums are local (one sample each)
    return (Q * N)^T                             (B, K): this rank's samples' soft assignments

Scores are cosine similarities in [-1, 1] (as DINOv2's normalised prototypes give), with a per-rank shift
so the ranks' batches differ in which prototypes they favour.
Inputs per rank: scores (B, K) fp32; temperature (float, 0.05); n_iters (int, 3).
Output: assign (B, K) fp32, each row summing to one. Tolerance: fp32 defaults (the all-reduced sums are
over N or N*K terms in an order the implementation chooses; relative error stays near 1e-6).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "sinkhorn_knopp_centering"
ID = 123
TITLE = "Distributed Sinkhorn-Knopp centering (SwAV / DINOv2): all-reduced row sums over the global batch"
CATEGORY = "application"
ORIGIN = "DINOv2 SinkhornKnoppTeacher.sinkhorn_knopp_teacher / SwAV distributed_sinkhorn"
WORLD_SIZES = WorldSizes(min=2)
# full: DINOv2 ViT-g training, 65536 prototypes, 1024 samples per GPU (two global crops of 512 images)
SIZES = {"screen": {"batch": 32, "prototypes": 64, "iters": 3},
         "full": {"batch": 1024, "prototypes": 65536, "iters": 3}}
OUTPUTS = [Output("assign", torch.float32, shape=lambda s, ws, r: (s["batch"], s["prototypes"]))]


def make_inputs(ctx):
    s = ctx.size
    logits = ctx.randn(s["batch"], s["prototypes"]) + ctx.randn(1, s["prototypes"])
    scores = torch.tanh(logits * 0.5)
    return scores, 0.05, s["iters"]


def reference(scores, temperature, n_iters):
    n_total = scores.shape[0] * dist.get_world_size()
    k = scores.shape[1]
    q = torch.exp(scores / temperature).T
    total = q.sum()
    dist.all_reduce(total)
    q = q / total
    for _ in range(n_iters):
        rows = q.sum(dim=1, keepdim=True)
        dist.all_reduce(rows)
        q = q / rows / k
        q = q / q.sum(dim=0, keepdim=True) / n_total
    return (q * n_total).T.contiguous()


def speed_of_light(size, world_size):
    b, k, it = size["batch"], size["prototypes"], size["iters"]
    return {"link_bytes_per_rank": it * 2 * (world_size - 1) / world_size * k * 4, "flops": (4 * it + 3) * b * k}

"""Contrastive retrieval loss with in-batch negatives gathered across ranks: DPR's cross-GPU in-batch
negatives and CLIP / open_clip's gathered-features loss (the query side).

Each rank holds `batch` query embeddings and their positive passage (candidate) embeddings, both
L2-normalised, (batch, d) fp32: candidate i is query i's positive. Every rank all-gathers the candidates
of all ranks (ws * batch, d), scores its queries against all of them, logits = q @ C^T / temperature,
and takes the cross-entropy with the positive at global column rank * batch + i: every other rank's
candidates are negatives.
Inputs per rank: queries (batch, d) fp32; candidates (batch, d) fp32; temperature (float).
Output per rank: the per-query loss, (batch,) fp32.

Tolerance: fp32 defaults. The loss is O(log(ws * batch)); the dot products of unit vectors and the
log-sum-exp over ws * batch logits (at most 1/temperature = 20) differ between summation orders by a
few 1e-7 relative. TF32 GEMMs would not pass, and neither does a bf16-rounded result.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tasks.api import Output, WorldSizes

SLUG = "retrieval_inbatch_negatives"
ID = 108
TITLE = "Retrieval loss with cross-rank in-batch negatives (all-gather candidates, scores, cross-entropy)"
CATEGORY = "application"
ORIGIN = "DPR (Dense Passage Retrieval) cross-GPU in-batch negatives / open_clip gather_features loss"
WORLD_SIZES = WorldSizes(min=2)
# full: 4096 queries per rank with 768-dim (BERT-base) embeddings: 32768 candidates on 8 GPUs
SIZES = {"screen": {"batch": 16, "dim": 32},
         "full": {"batch": 4096, "dim": 768}}
OUTPUTS = [Output("loss", torch.float32, shape=lambda s, ws, r: (s["batch"],))]
TEMPERATURE = 0.05


def make_inputs(ctx):
    s = ctx.size
    queries = F.normalize(ctx.randn(s["batch"], s["dim"]), dim=-1)
    # positives correlated with their queries, so the loss is not uniform across rows
    candidates = F.normalize(queries + ctx.randn(s["batch"], s["dim"], scale=1.5), dim=-1)
    return queries, candidates, TEMPERATURE


def reference(queries, candidates, temperature):
    world, rank = dist.get_world_size(), dist.get_rank()
    batch = queries.shape[0]
    gathered = candidates.new_empty(world * batch, candidates.shape[1])
    dist.all_gather_into_tensor(gathered, candidates)
    logits = queries @ gathered.T / temperature
    labels = torch.arange(batch, device=queries.device) + rank * batch
    return F.cross_entropy(logits, labels, reduction="none")


def speed_of_light(size, world_size):
    b, d = size["batch"], size["dim"]
    return {"link_bytes_per_rank": (world_size - 1) * b * d * 4,
            "flops": 2 * b * world_size * b * d + 3 * b * world_size * b}

"""Distributed neighbour sampling across graph partitions: one hop of GraphSAGE-style mini-batch sampling
in DGL's DistGraph (sample_neighbors) and GraphLearn-for-PyTorch, where each rank owns a partition.

Rank r owns nodes [r*n, (r+1)*n) and their adjacency in CSR form: indptr (n+1,) int64 and indices
(nnz,) int64 holding global neighbour ids (every node has at least one neighbour). Each rank has a batch
of seed nodes (global ids, any owner, repeats allowed) and, per seed, `fanout` uniform random numbers u
in [0, 1) (drawn by the requester, so that the sample is reproducible whoever computes it). Sampling is
with replacement: the k-th sample of seed v is indices[indptr[v'] + min(floor(u_k * deg(v)), deg(v) - 1)]
with v' = v - owner*n, deg(v) = indptr[v'+1] - indptr[v'] and the product taken in fp32.
The exchange: group the seeds by owner, exchange counts, send seeds and their random numbers to the
owners (all-to-all with uneven splits), the owners sample from their CSR, and the sampled ids travel
back (the inverse all-to-all) into the seeds' order.
Output per rank: the sampled neighbour ids, (seeds, fanout) int64, compared exactly.

The split sizes depend on the seeds, so a full-size run needs real values.
"""
import torch

from tasks.api import Output, WorldSizes
from tasks.application._appA_routing import local_index, route

SLUG = "gnn_neighbor_sampling"
ID = 103
TITLE = "GNN neighbour sampling across partitions: seeds to owners, sampled ids back (all-to-all)"
CATEGORY = "application"
ORIGIN = "DGL DistGraph sample_neighbors / GraphLearn-for-PyTorch distributed neighbour sampling (GraphSAGE)"
WORLD_SIZES = WorldSizes(min=2)
# full: a 32M-node, 512M-edge graph (ogbn-papers100M scale per node) on 8 GPUs, 64K seeds per rank,
# fanout 15 (GraphSAGE's first hop)
SIZES = {"screen": {"nodes_per_rank": 64, "avg_degree": 4, "seeds": 48, "fanout": 5},
         "full": {"nodes_per_rank": 4 * 2**20, "avg_degree": 16, "seeds": 65536, "fanout": 15}}
OUTPUTS = [Output("neighbors", torch.int64, shape=lambda s, ws, r: (s["seeds"], s["fanout"]))]


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    n, nnz = s["nodes_per_rank"], s["nodes_per_rank"] * s["avg_degree"]
    # degrees >= 1 that sum to nnz: one edge per node plus random cut points for the rest
    cuts = ctx.randint(0, nnz - n + 1, (n - 1,)).sort().values
    zero = torch.zeros(1, dtype=torch.int64, device=ctx.device)
    extra = torch.cat([zero, cuts, zero + nnz - n])
    indptr = extra + torch.arange(n + 1, device=ctx.device)
    indices = ctx.randint(0, n * ws, (nnz,))
    seeds = ctx.randint(0, n * ws, (s["seeds"],))
    u = ctx.rand(s["seeds"], s["fanout"])
    return indptr, indices, seeds, u


def reference(indptr, indices, seeds, u):
    n = indptr.shape[0] - 1
    plan = route(seeds, n)
    wanted = local_index(plan.to_owners(seeds), n)
    draws = plan.to_owners(u)
    start = indptr[wanted]
    degree = indptr[wanted + 1] - start
    pick = torch.minimum((draws * degree[:, None].float()).long(), degree[:, None] - 1)
    return plan.back_from_owners(indices[start[:, None] + pick])


def speed_of_light(size, world_size):
    seeds, fanout = size["seeds"], size["fanout"]
    per_seed = 8 + 4 * fanout + 8 * fanout  # id out, random numbers out, sampled ids back
    return {"link_bytes_per_rank": (world_size - 1) / world_size * seeds * per_seed, "flops": 0}

"""Exact k-nearest-neighbour search over a database sharded across ranks: FAISS IndexShards (and the
multi-GPU GpuIndexFlat sharding) — every shard searches the same queries, then the per-shard top-k
lists are merged into the global top-k.

Rank r holds database rows [r*n, (r+1)*n) of the global database, db (n, D), and the same queries
q (Q, D) as every other rank. Each rank computes squared L2 distances from every query to its rows and
keeps its k nearest (local top-k), the ranks exchange their lists (all-gather of distances and global
row ids), and every rank merges them into the global top-k.

Order: by distance, ties broken by the smaller global row id. The vectors are int8-quantised embeddings
(integers in [-8, 8), as a FAISS scalar quantiser stores them) held as fp32, so every distance is an
exact integer whatever the summation order (also with TF32 or bf16 tensor-core products and fp32
accumulation), ties are frequent and the tie rule decides the ids.

Outputs, identical on every rank: dist (Q, k) fp32, ids (Q, k) int64 (global row ids), both exact.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "sharded_knn_search"
ID = 122
TITLE = "Sharded exact kNN search: local top-k, all-gather, global merge"
CATEGORY = "application"
ORIGIN = "FAISS IndexShards / multi-GPU sharded GpuIndexFlatL2 (search every shard, merge the top-k lists)"
WORLD_SIZES = WorldSizes(min=2)
# full: a 256K x 128 database per GPU (2M in all), a batch of 2048 queries, top-100 (the distance
# matrix, 2 GiB per rank, and its sort fit one GPU)
SIZES = {"screen": {"rows_per_rank": 256, "dim": 16, "queries": 32, "k": 8},
         "full": {"rows_per_rank": 2**18, "dim": 128, "queries": 2048, "k": 100}}
_shape = lambda s, ws, r: (s["queries"], s["k"])  # noqa: E731
OUTPUTS = [Output("dist", torch.float32, rtol=0, atol=0, shape=_shape), Output("ids", torch.int64, shape=_shape)]


def make_inputs(ctx):
    s = ctx.size
    db = ctx.randint(-8, 8, (s["rows_per_rank"], s["dim"])).float()
    queries = ctx.randint(-8, 8, (s["queries"], s["dim"]), shared=True).float()
    return db, queries, s["k"]


def _top_k_by_distance_then_id(dist_, ids, k):
    """The k smallest entries per row; a stable sort keeps equal distances in their order along the row,
    which both callers arrange to be ascending id."""
    order = torch.sort(dist_, dim=1, stable=True).indices[:, :k]
    return dist_.gather(1, order), ids.gather(1, order)


def reference(db, queries, k):
    world, rank = dist.get_world_size(), dist.get_rank()
    n = db.shape[0]
    d = (queries.square().sum(1, keepdim=True) - 2 * queries @ db.T + db.square().sum(1))
    ids = (torch.arange(n, device=db.device) + rank * n).expand_as(d)
    local_d, local_ids = _top_k_by_distance_then_id(d, ids, k)
    all_d = local_d.new_empty(world, *local_d.shape)
    all_ids = local_ids.new_empty(world, *local_ids.shape)
    dist.all_gather_into_tensor(all_d, local_d)
    dist.all_gather_into_tensor(all_ids, local_ids)
    # rank-major candidate lists: equal distances stay in ascending global id under a stable sort
    cand_d = all_d.permute(1, 0, 2).reshape(queries.shape[0], -1)
    cand_ids = all_ids.permute(1, 0, 2).reshape(queries.shape[0], -1)
    return _top_k_by_distance_then_id(cand_d, cand_ids, k)


def speed_of_light(size, world_size):
    n, d, q, k = size["rows_per_rank"], size["dim"], size["queries"], size["k"]
    return {"link_bytes_per_rank": (world_size - 1) * q * k * (4 + 8), "flops": 2 * q * n * d}

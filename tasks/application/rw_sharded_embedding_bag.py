"""Row-wise sharded embedding-bag lookup: TorchRec's row-wise (RW) sharding of a large embedding table,
where the ids are routed to the ranks owning their rows and the pooled results come back through a
reduce-scatter.

The table (V, d) fp32 is split by rows: rank r holds rows [r*V/ws, (r+1)*V/ws). Each rank has a batch of
`bags` bags of `pooling` ids each (global row ids, repeats allowed). Output row i is the sum of the table
rows of bag i (sum pooling). The exchange:
  1. group the (id, bag) pairs by owner, exchange counts, send ids and global bag numbers
     (rank * bags + i) to the owners (all-to-all with uneven splits);
  2. each owner looks up its rows and sums them into a partial result for every bag of the global batch,
     (ws * bags, d), zero where it owns nothing;
  3. a reduce-scatter sums the partial results over ranks and hands each rank its own bags.
Inputs per rank: table shard (V/ws, d) fp32; ids (bags, pooling) int64.
Output per rank: pooled (bags, d) fp32.

Tolerance: fp32 defaults; each output is a sum of `pooling` unit-scale rows whose order is the
implementation's choice (a few ulps).
The split sizes depend on the ids, so a full-size run needs real values.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.application._appA_routing import local_index, route

SLUG = "rw_sharded_embedding_bag"
ID = 106
TITLE = "Row-wise sharded embedding bag: ids to owners (all-to-all), pooled partials reduce-scattered"
CATEGORY = "application"
ORIGIN = "TorchRec row-wise sharding (RwSparseFeaturesDist + RwPooledEmbeddingDist) for DLRM embedding bags"
WORLD_SIZES = WorldSizes(min=2)
# full: a 32M x 128 table (4M rows per rank on 8 GPUs), 16K bags of 32 ids per rank
SIZES = {"screen": {"rows_per_rank": 64, "dim": 16, "bags": 12, "pooling": 4},
         "full": {"rows_per_rank": 4 * 2**20, "dim": 128, "bags": 16384, "pooling": 32}}
OUTPUTS = [Output("pooled", torch.float32, shape=lambda s, ws, r: (s["bags"], s["dim"]))]


def make_inputs(ctx):
    s = ctx.size
    table = ctx.randn(s["rows_per_rank"], s["dim"])
    ids = ctx.randint(0, s["rows_per_rank"] * ctx.world_size, (s["bags"], s["pooling"]))
    return table, ids


def reference(table, ids):
    world, rank = dist.get_world_size(), dist.get_rank()
    bags, pooling = ids.shape
    flat = ids.reshape(-1)
    bag_of = torch.arange(bags, device=ids.device).repeat_interleave(pooling) + rank * bags
    plan = route(flat, table.shape[0])
    rows = table[local_index(plan.to_owners(flat), table.shape[0])]
    partial = table.new_zeros(world * bags, table.shape[1]).index_add_(0, plan.to_owners(bag_of), rows)
    pooled = table.new_empty(bags, table.shape[1])
    dist.reduce_scatter_tensor(pooled, partial)
    return pooled


def speed_of_light(size, world_size):
    b, l, d = size["bags"], size["pooling"], size["dim"]
    ids_bytes = (world_size - 1) / world_size * b * l * 16  # id and bag number
    return {"link_bytes_per_rank": ids_bytes + (world_size - 1) / world_size * world_size * b * d * 4,
            "flops": b * l * d}

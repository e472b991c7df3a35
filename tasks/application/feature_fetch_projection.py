"""Sharded feature fetch followed by a linear projection: the input layer of a mini-batch GNN or
recommender over a distributed feature store (GraphLearn-for-PyTorch / WholeGraph, DGL DistTensor),
where each rank gathers the features of its batch's nodes from the ranks that own them and projects them.

The feature table (N, d) bf16 is split by rows: rank r holds rows [r*N/ws, (r+1)*N/ws). Each rank has a
batch of global node ids (any owner, repeats allowed, unsorted) and the projection weight (d, d_out)
bf16, identical on every rank. The exchange: group the ids by owner, exchange counts, send the ids to
their owners (all-to-all with uneven splits), the owners gather the rows and send them back (the inverse
all-to-all), then out = rows @ weight (bf16 GEMM, fp32 accumulation). An implementation may project on
the owners before sending (d_out < d halves the bytes).
Inputs per rank: features (N/ws, d) bf16; ids (batch,) int64; weight (d, d_out) bf16.
Output per rank: (batch, d_out) bf16.

Tolerance: bf16 defaults (the GEMM output is rounded to bf16, and projecting before or after the
exchange rounds in a different place).
The split sizes depend on the ids, so a full-size run needs real values.
"""
import torch

from tasks.api import Output, WorldSizes
from tasks.application._appA_routing import fetch_rows

SLUG = "feature_fetch_projection"
ID = 107
TITLE = "Sharded feature fetch (all-to-all request/response) + linear projection"
CATEGORY = "application"
ORIGIN = "GraphLearn-for-PyTorch / WholeGraph distributed feature store, GNN input projection"
WORLD_SIZES = WorldSizes(min=2)
# full: 4M nodes x 512 bf16 features per rank, 128K batch nodes per rank projected to 256
SIZES = {"screen": {"rows_per_rank": 64, "dim": 32, "batch": 48, "dim_out": 16},
         "full": {"rows_per_rank": 4 * 2**20, "dim": 512, "batch": 131072, "dim_out": 256}}
OUTPUTS = [Output("out", torch.bfloat16, shape=lambda s, ws, r: (s["batch"], s["dim_out"]))]


def make_inputs(ctx):
    s = ctx.size
    features = ctx.randn(s["rows_per_rank"], s["dim"], dtype=torch.bfloat16)
    ids = ctx.randint(0, s["rows_per_rank"] * ctx.world_size, (s["batch"],))
    weight = ctx.randn(s["dim"], s["dim_out"], dtype=torch.bfloat16, scale=s["dim"] ** -0.5, shared=True)
    return features, ids, weight


def reference(features, ids, weight):
    return fetch_rows(features, ids) @ weight


def speed_of_light(size, world_size):
    b, d, d_out = size["batch"], size["dim"], size["dim_out"]
    return {"link_bytes_per_rank": (world_size - 1) / world_size * b * (8 + 2 * min(d, d_out)),
            "flops": 2 * b * d * d_out}

"""Halo feature exchange for a partitioned GNN layer, forward: each rank fetches the features of the
remote (halo) nodes its partition's edges point to, as DGL's distributed training and PyG's
partition-parallel GNNs (e.g. BNS-GCN, PipeGCN) do before every layer's aggregation.

Rank r owns nodes [r*n, (r+1)*n) and their features (n, d) fp32. Its halo is a sorted list of distinct
remote node ids (none of them its own). The exchange: count the halo nodes per owner, exchange the
counts (all-to-all), send the requested ids to their owners (all-to-all with uneven splits), each owner
gathers the requested rows, and the rows travel back (the inverse all-to-all).
Output per rank: the halo features, (halo, d) fp32, row i the features of halo[i]. A pure copy, so the
tolerance is fp32's default (exact data is expected).

The split sizes depend on the halo ids, so a full-size run needs real values.
"""
import torch

from tasks.api import Output, WorldSizes
from tasks.application._appA_routing import fetch_rows, remote_ids

SLUG = "gnn_feature_exchange_forward"
ID = 104
TITLE = "GNN halo feature exchange, forward: remote node features fetched from owners (all-to-all)"
CATEGORY = "application"
ORIGIN = "DGL distributed GNN training / partition-parallel full-graph GCN (BNS-GCN, PipeGCN) halo exchange"
WORLD_SIZES = WorldSizes(min=2)
# full: 1M owned nodes with 256 features per rank and 256K halo nodes (about a quarter, as for a
# METIS-partitioned large graph)
SIZES = {"screen": {"nodes_per_rank": 64, "features": 16, "halo": 40},
         "full": {"nodes_per_rank": 2**20, "features": 256, "halo": 2**18}}
OUTPUTS = [Output("halo_features", torch.float32, shape=lambda s, ws, r: (s["halo"], s["features"]))]


def make_inputs(ctx):
    s = ctx.size
    return ctx.randn(s["nodes_per_rank"], s["features"]), remote_ids(ctx, s["nodes_per_rank"], s["halo"])


def reference(features, halo):
    return fetch_rows(features, halo)


def speed_of_light(size, world_size):
    return {"link_bytes_per_rank": size["halo"] * (8 + 4 * size["features"]), "flops": 0}

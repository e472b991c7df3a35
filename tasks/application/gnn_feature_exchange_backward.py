"""Halo gradient exchange for a partitioned GNN layer, backward: the gradients computed for remote
(halo) node features are sent back to the nodes' owners and summed into their feature gradients, the
backward of gnn_feature_exchange_forward in DGL's distributed training and partition-parallel
full-graph GCNs (BNS-GCN, PipeGCN).

Rank r owns nodes [r*n, (r+1)*n): it holds the gradient of its own features from its local edges
(n, d) fp32, its halo (sorted distinct remote ids) and the gradient for each halo row (halo, d) fp32.
The exchange: count the halo nodes per owner, exchange the counts, send ids and gradient rows to the
owners (all-to-all with uneven splits), and each owner adds every received row into its gradient
(index_add: several ranks' halos hold the same node).
Output per rank: the total gradient of its own features, (n, d) fp32.

Tolerance: fp32 defaults. Each output sums at most ws unit-scale terms, and the order of that sum is the
implementation's choice, which moves results by a few ulps.
The split sizes depend on the halo ids, so a full-size run needs real values.
"""
import torch

from tasks.api import Output, WorldSizes
from tasks.application._appA_routing import local_index, remote_ids, route

SLUG = "gnn_feature_exchange_backward"
ID = 105
TITLE = "GNN halo gradient exchange, backward: halo gradients sent to owners and summed (all-to-all)"
CATEGORY = "application"
ORIGIN = "DGL distributed GNN training / partition-parallel full-graph GCN (BNS-GCN, PipeGCN) halo exchange"
WORLD_SIZES = WorldSizes(min=2)
# full: 1M owned nodes with 256 features per rank, 256K halo nodes
SIZES = {"screen": {"nodes_per_rank": 64, "features": 16, "halo": 40},
         "full": {"nodes_per_rank": 2**20, "features": 256, "halo": 2**18}}
OUTPUTS = [Output("grad", torch.float32,
                  shape=lambda s, ws, r: (s["nodes_per_rank"], s["features"]))]


def make_inputs(ctx):
    s = ctx.size
    n, d = s["nodes_per_rank"], s["features"]
    return ctx.randn(n, d), remote_ids(ctx, n, s["halo"]), ctx.randn(s["halo"], d)


def reference(grad_local, halo, grad_halo):
    n = grad_local.shape[0]
    plan = route(halo, n)
    rows = local_index(plan.to_owners(halo), n)
    return grad_local.index_add(0, rows, plan.to_owners(grad_halo))


def speed_of_light(size, world_size):
    return {"link_bytes_per_rank": size["halo"] * (8 + 4 * size["features"]),
            "flops": size["halo"] * size["features"]}

"""Keyed-jagged-tensor all-to-all: TorchRec's KJTAllToAll for table-wise sharded embeddings, which
moves each feature's sparse ids from every rank's batch to the rank owning that feature's table.

A KJT holds F features for a batch of `batch` samples: lengths (F, batch) int64 (ids per feature and
sample) and values, all ids concatenated feature-major (feature 0's samples in order, then feature 1...).
Table-wise sharding: rank j owns features [j*F/ws, (j+1)*F/ws). The exchange:
  1. per destination, the number of values its features hold here; exchange these counts (all-to-all),
     which the host needs to size the value exchange;
  2. the lengths of each destination's features (all-to-all, equal splits);
  3. the values (all-to-all with the uneven splits from step 1);
  4. regroup what arrived (source rank, feature, sample) into the KJT layout of the owned features
     (feature, source rank, sample): the batch seen by the owner is the global batch, ws * batch samples.
Inputs per rank: lengths (F, batch) int64; values (total,) int64, total = F * batch * avg_len.
Outputs per rank: lengths (F/ws, ws * batch) int64 and values (F/ws * ws * batch * avg_len,) int64, both
compared exactly. Each (rank, feature) holds exactly batch * avg_len ids, spread over its samples at
random, so output shapes are fixed while every split is data-driven.

The split sizes are read from the exchanged counts, so a full-size run needs real values.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "kjt_all_to_all"
ID = 109
TITLE = "TorchRec KJT all-to-all: lengths, then values, per feature and rank, regrouped by feature"
CATEGORY = "application"
ORIGIN = "TorchRec KJTAllToAll (table-wise sharded EmbeddingBagCollection input distribution, DLRM)"
WORLD_SIZES = WorldSizes(min=2)
# full: 4 features per rank (32 on 8 GPUs), 16K samples per rank, 20 ids per feature and sample
SIZES = {"screen": {"features_per_rank": 2, "batch": 6, "avg_len": 3},
         "full": {"features_per_rank": 4, "batch": 16384, "avg_len": 20}}
OUTPUTS = [Output("lengths", torch.int64, shape=lambda s, ws, r: (s["features_per_rank"], ws * s["batch"])),
           Output("values", torch.int64, shape=lambda s, ws, r: (
               s["features_per_rank"] * ws * s["batch"] * s["avg_len"],))]
ID_SPACE = 10**6


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    n_feat, b, per_feature = s["features_per_rank"] * ws, s["batch"], s["batch"] * s["avg_len"]
    # random lengths with a fixed total per feature: cut [0, per_feature] at b - 1 random points
    cuts = ctx.randint(0, per_feature + 1, (n_feat, b - 1)).sort(dim=1).values
    edges = torch.cat([torch.zeros(n_feat, 1, dtype=torch.int64, device=ctx.device), cuts,
                       torch.full((n_feat, 1), per_feature, dtype=torch.int64, device=ctx.device)], dim=1)
    lengths = edges.diff(dim=1)
    values = ctx.randint(0, ID_SPACE, (n_feat * per_feature,))
    return lengths, values


def reference(lengths, values):
    world = dist.get_world_size()
    n_feat, batch = lengths.shape
    owned = n_feat // world
    send_counts = lengths.view(world, owned * batch).sum(1)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    recv_lengths = torch.empty_like(lengths)  # (world * owned, batch): [source rank][owned feature]
    dist.all_to_all_single(recv_lengths, lengths)
    recv_values = values.new_empty(int(recv_counts.sum()))
    dist.all_to_all_single(recv_values, values, recv_counts.tolist(), send_counts.tolist())
    segments = recv_values.split(recv_lengths.sum(1).tolist())  # one per (source rank, owned feature)
    by_feature = [segments[src * owned + f] for f in range(owned) for src in range(world)]
    out_lengths = recv_lengths.view(world, owned, batch).transpose(0, 1).reshape(owned, world * batch)
    return out_lengths, torch.cat(by_feature)


def speed_of_light(size, world_size):
    owned, b, avg = size["features_per_rank"], size["batch"], size["avg_len"]
    per_rank = world_size * owned * b * (1 + avg) * 8  # all features' lengths and values, int64
    return {"link_bytes_per_rank": (world_size - 1) / world_size * per_rank, "flops": 0}

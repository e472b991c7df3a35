"""Distributed sample sort with a balanced output layout: the regular-sampling sort of distributed
sorting benchmarks and engines (PSRS; the splitter / bucket exchange of Thrill, Spark's sortBy range
partitioner), followed by the rebalance that gives every rank an equal slice of the sorted array.

Rank r holds n keys (fp32, quantised to multiples of 1/256 so that equal keys are common; each rank's
keys follow a different distribution, so buckets come out uneven). Global element ids are
rank * n + local index. The reference:

  1. sorts its keys locally (stable) and takes `samples` regularly spaced ones;
  2. all-gathers the samples, sorts them, and takes every `samples`-th as the ws-1 splitters;
  3. sends each key to the bucket (rank) of its splitter interval (keys equal to a splitter go up),
     after exchanging bucket sizes (all-to-all), with an all-to-all of keys and ids; merges what it
     received (stable sort by key);
  4. rebalances: with every bucket's size known (all-gather), an all-to-all moves elements so that rank t
     ends up with global sorted positions [t*n, (t+1)*n).

Outputs on rank t: keys (n,) fp32 and ids (n,) int64, positions [t*n, (t+1)*n) of the global order by
(key, id): equal keys in ascending global id. This layout does not depend on the splitters, so any
correct sort matches exactly.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "distributed_sample_sort"
ID = 126
TITLE = "Distributed sample sort: splitters from samples, all-to-all buckets, rebalanced sorted slices"
CATEGORY = "application"
ORIGIN = "Parallel sorting by regular sampling (PSRS) / Spark sortBy range partitioning, with a rebalance step"
WORLD_SIZES = WorldSizes(min=2)
# full: 32M keys per GPU (256M in all), 256 samples per rank
SIZES = {"screen": {"keys": 512, "samples": 16}, "full": {"keys": 2**25, "samples": 256}}
_shape = lambda s, ws, r: (s["keys"],)  # noqa: E731
OUTPUTS = [Output("keys", torch.float32, rtol=0, atol=0, shape=_shape), Output("ids", torch.int64, shape=_shape)]


def make_inputs(ctx):
    n = ctx.size["keys"]
    spread, shift = 1 + 3 * ctx.rand(1), 4 * ctx.randn(1)
    keys = torch.round((ctx.randn(n) * spread + shift) * 256) / 256
    return keys, ctx.size["samples"]


def _all_to_all(values, send_counts, recv_counts):
    out = values.new_empty(sum(recv_counts))
    dist.all_to_all_single(out, values, recv_counts, send_counts)
    return out


def reference(keys, samples):
    world, rank = dist.get_world_size(), dist.get_rank()
    n = keys.shape[0]
    vals, idx = torch.sort(keys, stable=True)
    ids = idx + rank * n
    # splitters from regular samples of every rank
    local_samples = vals[torch.linspace(0, n - 1, samples, device=keys.device).long()]
    all_samples = local_samples.new_empty(world * samples)
    dist.all_gather_into_tensor(all_samples, local_samples)
    splitters = all_samples.sort().values[samples::samples][:world - 1]
    # bucket exchange
    edges = torch.searchsorted(vals, splitters)                 # first key >= each splitter
    send = torch.diff(edges, prepend=edges.new_zeros(1), append=edges.new_full((1,), n))
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    send_l, recv_l = send.tolist(), recv.tolist()
    got_keys, got_ids = _all_to_all(vals, send_l, recv_l), _all_to_all(ids, send_l, recv_l)
    # chunks arrive in source-rank order, each sorted: a stable sort keeps equal keys in ascending id
    got_keys, order = torch.sort(got_keys, stable=True)
    got_ids = got_ids[order]
    # rebalance: global positions [t*n, (t+1)*n) go to rank t
    sizes = send.new_empty(world)
    dist.all_gather_into_tensor(sizes, send.new_tensor([got_keys.shape[0]]))
    starts = torch.cumsum(sizes, 0) - sizes
    bounds = torch.arange(world + 1, device=keys.device) * n
    mine = (starts[rank], starts[rank] + sizes[rank])
    send_b = (torch.minimum(bounds[1:], mine[1]) - torch.maximum(bounds[:-1], mine[0])).clamp(min=0)
    recv_b = (torch.minimum(starts + sizes, bounds[rank + 1]) - torch.maximum(starts, bounds[rank])).clamp(min=0)
    send_b, recv_b = send_b.tolist(), recv_b.tolist()
    return _all_to_all(got_keys, send_b, recv_b), _all_to_all(got_ids, send_b, recv_b)


def speed_of_light(size, world_size):
    n = size["keys"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * n * (4 + 8), "flops": 0}

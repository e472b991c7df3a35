"""Expert-parallel load balancing (EPLB) across nodes: after the balancer computes a new placement of
logical experts onto physical expert slots (with redundant copies of hot experts), every GPU fetches the
weights of the experts it must now host from GPUs that hold them under the old placement.

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size). E logical experts; every rank has S = E/world_size + redundant_per_rank
physical slots. A placement is a (world_size, S) int64 map from physical slot to logical expert in which
every expert appears at least once (the extra slots hold copies).

Inputs per rank: weights (S, expert_numel) bf16, the flat weights of the experts in this rank's slots
under the old placement (copies of an expert are identical); old_map and new_map, the old and new
placements (the same on every rank). Output: new_weights (S, expert_numel) bf16, slot s holding the
weights of expert new_map[rank, s].

The reference is the straightforward P2P exchange (as vLLM's rearrange_expert_weights_inplace does): an
expert already on the destination rank is copied locally; otherwise the first old copy of it (lowest
rank, then slot) sends it with one batched isend/irecv per rank. A candidate may pick any copy, e.g.
one on the destination's own node to stay on NVLink. The output is a copy of bf16 values (bit-exact
for any correct candidate; the bf16 default tolerance is what the validator requires of bf16 outputs).
Which slots move depends on the maps, so a full-size run needs real values.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import gpus_per_node
from tasks.internode._replicated import replicated_context

SLUG = "eplb_expert_rebalance"
ID = 152
TITLE = "EPLB expert rebalancing: move expert weights to a new placement with redundant experts"
CATEGORY = "internode"
ORIGIN = "DeepSeek EPLB (expert-parallel load balancer) with vLLM's rearrange_expert_weights_inplace"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8, power_of_two=True)  # E/world_size experts per rank
# full: DeepSeek-V2-Lite's 64 experts (gate, up, down: 3 x 2048 x 1408 values each), one spare slot per GPU
SIZES = {"screen": {"experts": 32, "redundant_per_rank": 1, "expert_numel": 64, "gpus_per_node": 4},
         "full": {"experts": 64, "redundant_per_rank": 1, "expert_numel": 3 * 2048 * 1408, "gpus_per_node": 8}}


def _slots(size, world_size):
    return size["experts"] // world_size + size["redundant_per_rank"]


OUTPUTS = [Output("new_weights", torch.bfloat16, shape=lambda s, ws, r: (_slots(s, ws), s["expert_numel"]))]


def _placement(ctx, slots):
    """Every expert once plus random extra copies, shuffled over the slots (identical on all ranks)."""
    e, ws = ctx.size["experts"], ctx.world_size
    extra = ctx.randint(0, e, (ws * slots - e,), shared=True)
    experts = torch.cat([torch.arange(e, device=ctx.device), extra])
    return experts[ctx.randperm(ws * slots, shared=True)].view(ws, slots)


def make_inputs(ctx):
    s, ws = ctx.size, ctx.world_size
    gpus_per_node(s, ws)  # the world must be whole nodes
    if s["experts"] % ws:
        raise ValueError(f"{s['experts']} experts do not spread over {ws} ranks; use a power-of-two world size "
                         f"of at most {s['experts']}")
    slots = _slots(s, ws)
    old_map, new_map = _placement(ctx, slots), _placement(ctx, slots)
    weights = torch.stack([replicated_context(ctx, "expert", int(e)).randn(s["expert_numel"], dtype=torch.bfloat16)
                           for e in old_map[ctx.rank].tolist()])
    return weights, old_map, new_map


def reference(weights, old_map, new_map):
    me = dist.get_rank()
    old, new = old_map.tolist(), new_map.tolist()
    first_copy = {}
    for rank, experts in enumerate(old):
        for slot, e in enumerate(experts):
            first_copy.setdefault(e, (rank, slot))
    out = torch.empty_like(weights)
    ops = []
    for rank, experts in enumerate(new):
        for slot, e in enumerate(experts):
            if e in old[rank]:
                if rank == me:
                    out[slot] = weights[old[me].index(e)]
                continue
            src, src_slot = first_copy[e]
            if rank == me:
                ops.append(dist.P2POp(dist.irecv, out[slot], src))
            elif src == me:
                ops.append(dist.P2POp(dist.isend, weights[src_slot], rank))
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()
    return out


def speed_of_light(size, world_size):
    g = gpus_per_node(size, world_size)
    nodes, slots = world_size // g, _slots(size, world_size)
    # with random placements nearly every slot changes, and its expert sits on another node with
    # probability about (N-1)/N
    moved = slots * size["expert_numel"] * 2
    network = moved * (nodes - 1) / nodes
    return {"link_bytes_per_rank": moved, "network_bytes_per_rank": network, "flops": 0}

"""Gradient reduction of an expert-parallel MoE model: dense gradients all-reduced over the whole
data-parallel world, expert gradients only over the expert-data-parallel group of ranks that hold the
same experts (Megatron-Core DistributedDataParallel with separate expert gradient buffers and
expert_data_parallel groups).

Mesh: ep = 2 (inner) x edp = ws/2; rank = edp_rank * 2 + ep_rank. Every rank holds a replica of the
dense parameters (attention, norms, router) and, as rank ep_rank of its expert-parallel pair, the E/2
experts [ep_rank*E/2, (ep_rank+1)*E/2); the ws/2 ranks with the same ep_rank (the expert-data-parallel
group, built in make_inputs) hold the same experts. Each rank's loss is its micro-batch's mean scaled
by 1/ws (the global batch mean), so:

    dense  = sum over all ranks of dense_grad / ws             all-reduce over the world
    expert = sum over the edp group of expert_grad / ws        all-reduce over the edp group only:
             tokens from every rank reached these experts through the dispatch, so the scale is the
             world size, not the group size (Megatron's gradient_scaling_factor edp/dp for experts)

Inputs per rank: dense_grad (n,) fp32, expert_grad (E/2, F, D) fp32, this rank's gradients; the edp
group. Outputs: dense (n,) and expert (E/2, F, D) fp32. Tolerance: fp32 defaults.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes, warm_up

SLUG = "moe_expert_dp_grad_reduce"
ID = 88
TITLE = "MoE gradient reduction: dense grads over the world, expert grads over the expert-data-parallel group"
CATEGORY = "parallelism"
ORIGIN = "Megatron-Core DistributedDataParallel (expert gradient buffers reduced over expert_data_parallel groups)"
WORLD_SIZES = WorldSizes(min=4, multiple_of=2)  # an ep pair and at least two replicas of each
EP = 2
# full: a Mixtral-8x7B-like layer stack slice: 220 M dense parameters, 4 local experts of 14336 x 4096
SIZES = {"screen": {"dense": 2048, "experts": 4, "ffn": 16, "hidden": 8},
         "full": {"dense": 220 * 2**20, "experts": 8, "ffn": 14336, "hidden": 4096}}
OUTPUTS = [Output("dense", torch.float32, shape=lambda s, n, r: (s["dense"],)),
           Output("expert", torch.float32, shape=lambda s, n, r: (s["experts"] // EP, s["ffn"], s["hidden"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    edp_groups = [dist.new_group(list(range(j, n, EP))) for j in range(EP)]
    group = edp_groups[ctx.rank % EP]
    warm_up([group], ctx.device)
    return ctx.randn(s["dense"]), ctx.randn(s["experts"] // EP, s["ffn"], s["hidden"]), group


def reference(dense_grad, expert_grad, edp_group):
    world = dist.get_world_size()
    dense = dense_grad / world
    expert = expert_grad / world
    dist.all_reduce(dense)
    dist.all_reduce(expert, group=edp_group)
    return dense, expert


def speed_of_light(size, world_size):
    n = size["dense"]
    e = size["experts"] // EP * size["ffn"] * size["hidden"]
    edp = world_size // EP
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * n * 4 + 2 * (edp - 1) / edp * e * 4,
            "flops": n + e}

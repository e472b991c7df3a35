"""Pipeline-parallel stage boundary across nodes, one steady-state step of Megatron-LM's interleaved
1F1B schedule: every stage sends the activation it produced forward and the input gradient it computed
backward, and receives the same from its neighbours, in one batched exchange.

Layout (node-major): rank r is on node r // G at local rank r % G, G = size["gpus_per_node"] (8 at full
size, 4 at screen size). Each node is one pipeline stage (stage = node) running tensor parallelism with
sequence parallelism over its G GPUs, so local rank l holds sequence slice l of the stage's boundary
tensors; the pipeline group of a rank is the ranks with its local rank on every node (built in
make_inputs; it crosses the network at every hop). With virtual stages (interleaving) the last stage's
output feeds the next model chunk on stage 0, so the pipeline wraps around into a ring.

Inputs per rank, bf16, (seq/G, micro_batch, hidden) (Megatron's [s, b, h]): act, the output of this
stage for one micro-batch; grad, the gradient of this stage's input for an earlier micro-batch.
Outputs: recv_act, the activation from the previous stage (same local rank), and recv_grad, the
gradient from the next stage. Copies of bf16 values, bit-exact for any correct candidate (the bf16
default tolerance is what the validator requires of bf16 outputs).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes
from tasks.internode._nodes import node_groups

SLUG = "pp_cross_node_boundary"
ID = 143
TITLE = "Pipeline stage boundary across nodes: activations forward, gradients backward (interleaved 1F1B)"
CATEGORY = "internode"
ORIGIN = "Megatron-LM interleaved 1F1B p2p_communication (send_forward_backward_recv_forward_backward)"
WORLD_SIZES = WorldSizes(min=16, multiple_of=8)
# full: Llama-3-70B hidden 8192, 8k-token micro-batch, sequence-parallel over 8 GPUs: 16 MiB per tensor
SIZES = {"screen": {"seq": 32, "micro_batch": 2, "hidden": 16, "gpus_per_node": 4},
         "full": {"seq": 8192, "micro_batch": 1, "hidden": 8192, "gpus_per_node": 8}}


def _shape(s, ws=None, rank=None):
    return (s["seq"] // s["gpus_per_node"], s["micro_batch"], s["hidden"])


OUTPUTS = [Output("recv_act", torch.bfloat16, shape=_shape), Output("recv_grad", torch.bfloat16, shape=_shape)]


def make_inputs(ctx):
    _, pipeline = node_groups(ctx)
    act = ctx.randn(*_shape(ctx.size), dtype=torch.bfloat16)
    grad = ctx.randn(*_shape(ctx.size), dtype=torch.bfloat16)
    return act, grad, pipeline


def reference(act, grad, pipeline_group):
    ranks = dist.get_process_group_ranks(pipeline_group)
    stage, stages = dist.get_rank(pipeline_group), len(ranks)
    nxt, prv = ranks[(stage + 1) % stages], ranks[(stage - 1) % stages]
    recv_act, recv_grad = torch.empty_like(act), torch.empty_like(grad)
    ops = [dist.P2POp(dist.isend, act, nxt, pipeline_group), dist.P2POp(dist.irecv, recv_act, prv, pipeline_group),
           dist.P2POp(dist.isend, grad, prv, pipeline_group), dist.P2POp(dist.irecv, recv_grad, nxt, pipeline_group)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return recv_act, recv_grad


def speed_of_light(size, world_size):
    s = size
    network = 2 * s["seq"] // s["gpus_per_node"] * s["micro_batch"] * s["hidden"] * 2
    return {"link_bytes_per_rank": network, "network_bytes_per_rank": network, "flops": 0}

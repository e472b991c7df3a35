"""Pipeline-parallel exchange between two tensor-parallel stages with Megatron-LM's scatter-gather
optimisation: instead of every TP rank sending the whole (TP-replicated) activation to its peer, each
sends 1/tp of it and the receiving stage all-gathers the pieces over its TP group
(Megatron-LM p2p_communication with scatter_gather_tensors_in_pipeline: split_tensor_into_1d_equal_chunks
/ gather_split_1d_tensor; Narayanan et al. 2021, section 4.1).

Mesh: pp = 2 stages (outer) x tp = ws/2 (inner); rank = stage * tp + tp_rank; rank r's pipeline peer is
the rank with the same tp_rank in the other stage. The TP groups are built in make_inputs. This is one
steady-state 1F1B step: stage 0 sends the activation of the next micro-batch forward while stage 1 sends
the gradient of the previous one backward (send_forward_recv_backward / send_backward_recv_forward).
Within a stage the tensor to send (S, B, D) is identical on all TP ranks (the output of a row-parallel
layer after its all-reduce). On every rank:

    piece    = chunk tp_rank of the flattened tensor (1/tp of it)
    exchange piece with the peer (send and receive together, batched)
    full     = all_gather of the received pieces over the TP group, reshaped to (S, B, D)
    y        = full @ w^T with this rank's column-parallel weight w (F/tp, D): the consumer of the tensor

Inputs per rank: send (S, B, D) bf16 (stage 0: the activation, stage 1: the gradient, shared within the
stage); w (F/tp, D) bf16, this rank's rows; the TP group. Output: y (S, B, F/tp) bf16. Tolerance: bf16
defaults (the same GEMM on the same data).
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes, warm_up

SLUG = "pipeline_tp_scatter_gather_p2p"
ID = 83
TITLE = "Pipeline send/recv between TP stages with scatter-gather: 1/tp pieces over p2p, all-gather in the stage"
CATEGORY = "parallelism"
ORIGIN = "Megatron-LM p2p_communication scatter_gather_tensors_in_pipeline (1F1B steady-state exchange)"
WORLD_SIZES = WorldSizes(min=4, max=16, power_of_two=True)  # 2 stages of tp >= 2 ranks
# full: Llama-2-70B-sized activations (hidden 8192, 4096 tokens) feeding a column-parallel fc1 (F 28672)
SIZES = {"screen": {"seq": 16, "batch": 2, "hidden": 32, "ffn": 64},
         "full": {"seq": 4096, "batch": 1, "hidden": 8192, "ffn": 28672}}
OUTPUTS = [Output("y", torch.bfloat16, shape=lambda s, n, r: (s["seq"], s["batch"], s["ffn"] // (n // 2)))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    tp = n // 2
    stage = ctx.rank // tp
    groups = [dist.new_group(list(range(i * tp, (i + 1) * tp))) for i in range(2)]
    shape = (s["seq"], s["batch"], s["hidden"])
    activation = ctx.randn(*shape, dtype=torch.bfloat16, shared=True)
    gradient = ctx.randn(*shape, dtype=torch.bfloat16, shared=True)
    w = ctx.randn(s["ffn"] // tp, s["hidden"], dtype=torch.bfloat16, scale=s["hidden"] ** -0.5)  # this rank's rows
    warm_up([groups[stage]], ctx.device)
    return (activation if stage == 0 else gradient), w, groups[stage]


def reference(send, w, tp_group):
    world, rank = dist.get_world_size(), dist.get_rank()
    tp = dist.get_world_size(tp_group)
    peer = (rank + world // 2) % world
    piece = send.reshape(tp, -1)[dist.get_rank(tp_group)].contiguous()
    got = torch.empty_like(piece)
    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, piece, peer), dist.P2POp(dist.irecv, got, peer)]):
        req.wait()
    full = send.new_empty(send.numel())
    dist.all_gather_into_tensor(full, got, group=tp_group)
    return full.view_as(send) @ w.t()


def speed_of_light(size, world_size):
    s, b, d, f = size["seq"], size["batch"], size["hidden"], size["ffn"]
    tp = world_size // 2
    act = s * b * d * 2
    return {"link_bytes_per_rank": act / tp + (tp - 1) / tp * act, "flops": 2 * s * b * d * f / tp}

"""Backward of a column-parallel linear layer under sequence parallelism: re-all-gather of the input
overlapped with the input-gradient GEMM, then reduce-scatter of the input gradient overlapped with the
weight-gradient GEMM (Megatron-LM LinearWithGradAccumulationAndAsyncCommunication with
sequence_parallel=True; Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models").

Forward (not part of the task): rank r holds positions [r*S/ws, (r+1)*S/ws) of the input, x_s
(S/ws, B, D), all-gathers the sequence and multiplies by its weight rows w_s (F/ws, D). To save memory
Megatron keeps only x_s, so backward gathers it again. Given the gradient of this rank's output columns
for the whole sequence, grad_out (S, B, F/ws):

    x_full      = all_gather(x_s, seq)                          (launched first, asynchronously)
    partial     = grad_out @ w_s                                (S, B, D), computed while x gathers
    grad_input  = reduce_scatter(partial, seq)                  (S/ws, B, D), launched asynchronously
    grad_weight = grad_out^T @ x_full  over (S, B)              (F/ws, D), computed while it reduces

All tensors are bf16. Outputs: grad_input (S/ws, B, D) and grad_weight (F/ws, D). Tolerance: bf16
defaults; grad_input with atol 2e-2 because the bf16 reduce-scatter sums in an implementation-defined
order.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "sp_column_parallel_linear_backward"
ID = 76
TITLE = "Sequence-parallel column-parallel linear backward: all-gather input, dgrad + reduce-scatter, wgrad overlap"
CATEGORY = "fused"
ORIGIN = "Megatron-LM ColumnParallelLinear backward with sequence parallelism (all-gather + reduce-scatter overlap)"
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=32)  # ws divides the sequence (32 at screen size), the features
# full: Llama-2-70B-sized QKV projection without GQA (8192 -> 3 x 8192), 8192 tokens
SIZES = {"screen": {"seq": 32, "batch": 2, "in_features": 32, "out_features": 64},
         "full": {"seq": 8192, "batch": 1, "in_features": 8192, "out_features": 24576}}
OUTPUTS = [Output("grad_input", torch.bfloat16, atol=2e-2,
                  shape=lambda s, n, r: (s["seq"] // n, s["batch"], s["in_features"])),
           Output("grad_weight", torch.bfloat16, shape=lambda s, n, r: (s["out_features"] // n, s["in_features"]))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    seq, b, d, f = s["seq"], s["batch"], s["in_features"], s["out_features"]
    x = ctx.randn(seq // n, b, d, dtype=torch.bfloat16)
    grad_out = ctx.randn(seq, b, f // n, dtype=torch.bfloat16)
    w = ctx.randn(f // n, d, dtype=torch.bfloat16, scale=f ** -0.5)   # the summed grad_input is O(1)
    return x, grad_out, w


def reference(x, grad_out, w):
    world = dist.get_world_size()
    sl, b, d = x.shape
    x_full = x.new_empty(world * sl, b, d)
    gather = dist.all_gather_into_tensor(x_full, x, async_op=True)
    partial = grad_out @ w
    gather.wait()
    grad_input = x.new_empty(sl, b, d)
    reduce = dist.reduce_scatter_tensor(grad_input, partial, async_op=True)
    grad_weight = grad_out.reshape(-1, grad_out.shape[-1]).t() @ x_full.view(-1, d)
    reduce.wait()
    return grad_input, grad_weight


def speed_of_light(size, world_size):
    s, b, d, f = size["seq"], size["batch"], size["in_features"], size["out_features"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * s * b * d * 2,
            "flops": 4 * s * b * d * f / world_size}

"""Backward of a tensor-parallel column-parallel linear layer: input-gradient GEMM + all-reduce,
overlapped with the weight- and bias-gradient GEMMs (Megatron-LM ColumnParallelLinear backward,
LinearWithGradAccumulationAndAsyncCommunication with async_tensor_model_parallel_allreduce).

Forward (not part of the task): every tensor-parallel rank holds the same input x (T, D) and its rows
w_s (F/ws, D) of the weight, and computes its columns of y = x @ w^T + b. Backward on each rank, given
the gradient of its output columns grad_out (T, F/ws):

    grad_input  = all_reduce(grad_out @ w_s)     (T, D): every rank's partial product summed
    grad_weight = grad_out^T @ x                  (F/ws, D), local
    grad_bias   = sum over tokens of grad_out     (F/ws,), local

Megatron launches the all-reduce asynchronously and computes the weight gradient while it runs (with
CUDA_DEVICE_MAX_CONNECTIONS=1 so the communication kernel is scheduled first).

All tensors are bf16. Inputs per rank: x (T, D) (identical on all ranks), grad_out (T, F/ws), w_s
(F/ws, D). Outputs: grad_input (T, D), grad_weight (F/ws, D), grad_bias (F/ws,). Tolerance: bf16
defaults; grad_input with atol 2e-2 because the bf16 all-reduce sums in an implementation-defined order.
"""
import torch
import torch.distributed as dist

from tasks.api import Output, WorldSizes

SLUG = "column_parallel_linear_backward"
ID = 75
TITLE = "Column-parallel linear backward: dgrad GEMM + async all-reduce overlapped with wgrad GEMM"
CATEGORY = "fused"
ORIGIN = ("Megatron-LM ColumnParallelLinear backward (LinearWithGradAccumulationAndAsyncCommunication, "
          "async_tensor_model_parallel_allreduce)")
WORLD_SIZES = WorldSizes(min=2, power_of_two=True, max=64)  # ws divides the output features
# full: a Llama-2-70B-sized MLP fc1 (hidden 8192, 2 x 28672 gate+up rows), 4096 tokens
SIZES = {"screen": {"tokens": 32, "in_features": 32, "out_features": 128},
         "full": {"tokens": 4096, "in_features": 8192, "out_features": 57344}}
OUTPUTS = [Output("grad_input", torch.bfloat16, atol=2e-2, shape=lambda s, n, r: (s["tokens"], s["in_features"])),
           Output("grad_weight", torch.bfloat16, shape=lambda s, n, r: (s["out_features"] // n, s["in_features"])),
           Output("grad_bias", torch.bfloat16, shape=lambda s, n, r: (s["out_features"] // n,))]


def make_inputs(ctx):
    s, n = ctx.size, ctx.world_size
    t, d, f = s["tokens"], s["in_features"], s["out_features"]
    x = ctx.randn(t, d, dtype=torch.bfloat16, shared=True)
    grad_out = ctx.randn(t, f // n, dtype=torch.bfloat16)
    w = ctx.randn(f // n, d, dtype=torch.bfloat16, scale=f ** -0.5)   # the summed grad_input is O(1)
    return x, grad_out, w


def reference(x, grad_out, w):
    grad_input = grad_out @ w
    work = dist.all_reduce(grad_input, async_op=True)
    grad_weight = grad_out.t() @ x
    grad_bias = grad_out.sum(0)
    work.wait()
    return grad_input, grad_weight, grad_bias


def speed_of_light(size, world_size):
    t, d, f = size["tokens"], size["in_features"], size["out_features"]
    return {"link_bytes_per_rank": 2 * (world_size - 1) / world_size * t * d * 2,
            "flops": 4 * t * d * f / world_size}

"""Compute kernels: roofline time from FLOPs and bytes, with calibratable efficiencies, slowed down while
communication kernels hold some of the GPU's SMs."""
from __future__ import annotations

from pkbsim.timing.device_kernel import CLOCK_GHZ, L2_LATENCY_US, LOAD_LATENCY_US
from pkbsim.timing.topology import Topology

# Ops that launch no kernel: views, allocations and metadata (the world records them like any other op).
NO_KERNEL = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view", "_unsafe_view", "reshape",
    "t", "transpose", "permute", "expand", "as_strided", "slice", "select", "unsqueeze", "squeeze", "detach",
    "alias", "split", "split_with_sizes", "chunk", "unbind", "lift_fresh", "_reshape_alias", "view_as",
    "set_", "resize_", "record_stream",
})
# Ops after which the host waits for the device (a device-to-host read of a value).
HOST_SYNC = frozenset({"_local_scalar_dense", "item"})


# torch dtype names (as traces write them) -> the peak-FLOP/s columns of topology files
TORCH_DTYPES = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16",
                "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}


def peak_flops(topo: Topology, dtype: str) -> float:
    """Dense peak FLOP/s for a dtype (bf16 or bfloat16); one the GPU lists no peak for falls back to fp32."""
    peaks = topo.gpu.peak_tflops
    dtype = TORCH_DTYPES.get(dtype, dtype)
    return 1e12 * peaks.get(dtype, peaks.get("fp32", max(peaks.values())))


# An elementwise op on a slower CUDA path (pkbsim/timing/kernel_path.py) goes at a rate in elements written,
# whatever their bytes: "strided" (elementwise_kernel<128, 2 or 4>, offsets computed per element) keeps one
# element per thread in flight (the store through a computed offset ends each step), and "cast"
# (unrolled_elementwise_kernel with LoadWithCast) converts each element through a switch on its dtype. On an
# H200, the one row this is fitted on: allreduce_residual_rmsnorm's bf16 -> float32 `_to_copy`, 64 Mi
# elements in 191.7 us (350 G/s). The same GPU ran ring_attention_causal's float32 broadcast subtract at
# 339 G/s and allreduce_residual_rmsnorm's bf16 broadcast multiply, half the bytes an element, at 407 G/s.
# Counted per SM: the rate grows with the SMs issuing the work.
PATH_ELEMENTS_PER_SM_US = 67_108_864 / 191.7 / 132
# torch's reduce_kernel (Reduce.cuh) takes about 1 us more than an elementwise kernel, however few its inputs:
# on an H100, warm, a [64, 16] row sum took 2.08 us and a sum over 8 rows of 4096 2.24, against 1.15 for a
# one-element add (the two rows this is fitted on; retaken 2026-12-05 with four more ops: 2.08, 2.18 and 1.15,
# benchmarks/results/small_op_context_h100.json)
REDUCE_FLOOR_EXTRA_US = 1.0
# A thread's step on a slow path (a load through a computed offset or a dtype switch, its conversion, the
# store that ends the step) takes longer than the bare round trip of a chain of dependent loads: on an H100,
# warm, a 4096-element bf16 -> float32 copy (4 steps) took 2.21 us against 1.15 for a one-element add, 0.353 us
# a later step where an L2 round trip is 0.2 (the one row this is fitted on, small_op_context_h100.json). It
# scales with the round trip: the same copy after a 512 MiB read, 0.73 us a step where an HBM one is 0.426.
PATH_STEP_TRIPS = (2.21 - 1.15) / 3 / L2_LATENCY_US


def kernel_us(topo: Topology, flops: float, nbytes: float, dtype: str, model: dict, comm_sms: int = 0,
              launch: dict | None = None, cold: bool = False) -> float:
    """max(FLOPs / (peak x efficiency), bytes / (HBM x efficiency), floor), stretched by sms/(sms - comm_sms):
    a kernel that overlaps communication gets only the SMs the communication kernels leave free. `launch`
    (an op's or a kernel's record) may say more: an elementwise op's slower CUDA `path`, where its `elements`
    go at PATH_ELEMENTS_PER_SM_US if that is slower, plus a clock of an SM for each element read a cache line
    each (`lines`), and the bytes its sectors fetch unused (`overfetch`) pass HBM with its own; a thread's
    `steps` in sequence, each a memory round trip (a few elements, or a gather's index then its value: a kernel
    of few blocks waits on them, not on bandwidth; a slow path's step is PATH_STEP_TRIPS of them); the
    `splits` torch launches it as (an operand past 2 GiB of offsets), each its own floor and steps; and its
    `kernel` family where the floor is not the elementwise one (REDUCE_FLOOR_EXTRA_US).
    The floor is a warm kernel's (its inputs in the L2); a `cold` kernel's round trips, the floor's one among
    them, go to HBM (LOAD_LATENCY_US against L2_LATENCY_US; cold_inputs says which)."""
    c, launch = model["compute"], launch or {}
    floor = c["min_kernel_us"] + (REDUCE_FLOOR_EXTRA_US if launch.get("kernel") == "reduce" else 0.0)
    trip = LOAD_LATENCY_US if cold else L2_LATENCY_US
    # a warp's load touching 32 lines takes 32 clocks of its SM's L1 (one tag lookup a line a clock), on top of
    # the path's rate: a transposed copy's threads read a line each
    lines_us = launch.get("lines", 0) / (topo.gpu.sms * CLOCK_GHZ * 1e3)
    path_us = launch.get("elements", 0) / (topo.gpu.sms * PATH_ELEMENTS_PER_SM_US) + lines_us \
        if launch.get("path") else 0.0
    step = trip * (PATH_STEP_TRIPS if launch.get("path") else 1.0)
    chain = floor + (trip - L2_LATENCY_US) + (launch.get("steps", 1) - 1) * step
    t = max(flops / (peak_flops(topo, dtype) * c["matmul_efficiency"]) * 1e6,
            (nbytes + launch.get("overfetch", 0)) / (topo.gpu.hbm_GBps * 1e9 * c["memory_efficiency"]) * 1e6,
            path_us,
            launch.get("splits", 1) * chain)
    free = max(topo.gpu.sms - comm_sms, 1)
    return t * topo.gpu.sms / free


def cold_inputs(topo: Topology, op: dict) -> bool:
    """Were the op's inputs pushed out of the L2 before it ran: the rank moved more than the L2 holds since it
    last touched them (`reuse_bytes`, pkbsim.timing.reuse). A record without it (a trace from before the rule, a
    hand-written one) is warm, as the calibrated kernel floor is. On an H200, of a [4096] float32 subtract, a
    gather of one logit a row and a one-element add: 1.38, 9.57 and 1.12 us after a 512 MiB read, 0.90, 4.42
    and 0.93 warm (benchmarks/results/small_op_context_h200.json)."""
    return op.get("reuse_bytes", 0) > topo.gpu.l2_MB * 1e6


def op_us(topo: Topology, op: dict, dtype: str, model: dict, comm_sms: int = 0) -> float:
    """A torch op of the trace: one kernel (kernel_us), or, where it records the kernels CUDA launches for it
    (`kernels`, pkbsim.timing.op_kernels.Launch), their times summed, each at least the kernel floor, and at
    least its FLOPs' time. A kernel's `reread` bytes cost HBM traffic only where the rows it keeps live (those
    resident on every SM, at most all of its `span`) overflow this GPU's L2 (below that they are L2 hits, not
    charged)."""
    flops, dtype, cold = op.get("flops", 0), op.get("dtype", dtype), cold_inputs(topo, op)
    parts = op.get("kernels")
    if not parts:
        return kernel_us(topo, flops, op.get("bytes_read", 0) + op.get("bytes_written", 0), dtype, model,
                         comm_sms, op, cold)
    l2 = topo.gpu.l2_MB * 1e6

    def one(k: dict) -> float:
        live = min(topo.gpu.sms * k.get("resident", 0), k.get("span", 0))
        again = k.get("reread", 0) if live > l2 else 0
        return kernel_us(topo, 0, k["read"] + k["written"] + again, dtype, model, comm_sms, k, cold)
    return max(kernel_us(topo, flops, 0, dtype, model, comm_sms), sum(one(k) for k in parts))


def local_copy_us(topo: Topology, nbytes: float) -> float:
    """A one-rank collective is a copy on the GPU: read and write once at HBM bandwidth."""
    return 2 * nbytes / (topo.gpu.hbm_GBps * 1e3)

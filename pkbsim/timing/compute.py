"""Compute kernels: roofline time from FLOPs and bytes, with calibratable efficiencies, slowed down while
communication kernels hold some of the GPU's SMs."""
from __future__ import annotations

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


def kernel_us(topo: Topology, flops: float, nbytes: float, dtype: str, model: dict, comm_sms: int = 0) -> float:
    """max(FLOPs / (peak x efficiency), bytes / (HBM x efficiency), floor), stretched by sms/(sms - comm_sms):
    a kernel that overlaps communication gets only the SMs the communication kernels leave free."""
    c = model["compute"]
    t = max(flops / (peak_flops(topo, dtype) * c["matmul_efficiency"]) * 1e6,
            nbytes / (topo.gpu.hbm_GBps * 1e9 * c["memory_efficiency"]) * 1e6,
            c["min_kernel_us"])
    free = max(topo.gpu.sms - comm_sms, 1)
    return t * topo.gpu.sms / free


def local_copy_us(topo: Topology, nbytes: float) -> float:
    """A one-rank collective is a copy on the GPU: read and write once at HBM bandwidth."""
    return 2 * nbytes / (topo.gpu.hbm_GBps * 1e3)

"""What `torch.cuda.get_device_properties` answers on a simulated rank: the GPU of the modelled machine.

Programs size grids and buffers from these figures (SM count, shared memory, L2), so they come from the
topology file the timing model uses, plus per-architecture limits of the CUDA programming guide.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

DEFAULT_TOPOLOGY = "hgx-h100"

# the name CUDA reports for a topology's GPU model (nvidia-smi / cudaGetDeviceProperties)
_CUDA_NAMES = {"H100 SXM5 80GB": "NVIDIA H100 80GB HBM3", "H200 SXM 141GB": "NVIDIA H200",
               "A100 SXM4 80GB": "NVIDIA A100-SXM4-80GB", "GeForce RTX 5090": "NVIDIA GeForce RTX 5090",
               "B200 (HGX, 1000 W)": "NVIDIA B200", "B200 (GB200, 1200 W)": "NVIDIA B200"}

# arch -> (max threads per SM, shared memory per SM, shared memory per block with opt-in), CUDA C++
# programming guide, "Technical Specifications per Compute Capability"
_ARCH_LIMITS = {"sm80": (2048, 167936, 166912), "sm90": (2048, 233472, 232448),
                "sm100": (2048, 233472, 232448), "sm120": (1536, 102400, 101376)}


@dataclass(frozen=True)
class DeviceProperties:
    """Field names as torch's _CudaDeviceProperties."""
    name: str
    major: int
    minor: int
    multi_processor_count: int
    total_memory: int
    L2_cache_size: int
    max_threads_per_multi_processor: int
    shared_memory_per_multiprocessor: int
    shared_memory_per_block_optin: int
    shared_memory_per_block: int = 49152
    regs_per_multiprocessor: int = 65536
    warp_size: int = 32
    is_integrated: int = 0
    is_multi_gpu_board: int = 0


@functools.cache
def device_properties(topology: str = DEFAULT_TOPOLOGY) -> DeviceProperties:
    from pkbsim.timing.topology import load_topology

    gpu = load_topology(topology).gpu
    name = _CUDA_NAMES.get(gpu.model, "NVIDIA " + gpu.model)
    cc = gpu.arch.removeprefix("sm")
    threads, smem_sm, smem_block = _ARCH_LIMITS.get(gpu.arch, _ARCH_LIMITS["sm90"])
    return DeviceProperties(name, int(cc[:-1]), int(cc[-1]), gpu.sms, int(gpu.hbm_GB * 2**30),
                            int(gpu.l2_MB * 2**20), threads, smem_sm, smem_block)

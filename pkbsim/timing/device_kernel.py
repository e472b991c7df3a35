"""Time of a device kernel (Triton or inline CUDA) from the work the interpreter counted, not from how long
the simulator took to run it: its local memory traffic through the memory-level parallelism its blocks
have in flight, in waves of resident blocks; the instructions it issued; its atomics; and its flag waits as
hops of one flag's latency each. Peer traffic is timed by the flow network (pkbsim.timing.replay); this
module gives its rate cap and the kernel's own part.

The constants are for Hopper (sm90); `benchmarks/device_kernel_model_check.py` measures them and the
model against one H200 (docs/timing_model.md says which were fitted and which are held out).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pkbsim.timing.topology import Topology

CLOCK_GHZ = 1.98            # H100/H200 SXM boost clock (datasheets)
ISSUE_PER_SM_CLOCK = 4      # warp instructions per SM per clock: four schedulers
THREADS_PER_SM = 2048       # resident threads per SM (sm90)
BLOCKS_PER_SM = 32          # resident blocks per SM (sm90)
# Fitted on one H200, one microbenchmark each (benchmarks/results/device_kernel_model_check_h200.json; the
# other rows there are held out):
LOAD_LATENCY_US = 0.426     # a load's round trip at low load (a 16-block copy: t_copy_grid16, 16 Mi)
ATOMICS_PER_US = 131_600    # value-returning atomics on distinct addresses (t_atomic_spread, 16 Mi)
REDUCTIONS_PER_US = 396_400  # fire-and-forget ones (c_atomic_spread: atomicAdd, result unused, 16 Mi)
HOT_ATOMIC_US = 0.0238      # one more value-returning atomic on the same address (t_atomic_hot, 4 Mi)
HOT_REDUCTION_US = 0.000731  # one more reduction on the same address (c_atomic_hot, 4 Mi)
# Chosen on the H200's inline-CUDA x64 runs (benchmarks/results/device_program_kernels_model_check_h200.json:
# grid-stride loops of 1-2 blocks over 130-270 KB; 0.18-0.2 us a load fit them, 0.2 taken):
L2_LATENCY_US = 0.2         # a round trip that hits the L2: a block's later loads of data that fits it, an atomic,
                            # a flag wait's first read (0.172 us a wait on an H100: c_poll_acquire, 16 and 64)
# Fitted on one H100 (benchmarks/results/device_kernel_model_check_h100.json, one microbenchmark each; the H100
# has the H200's SMs and L2):
SYS_FENCE_US = 0.6965       # a system-scope fence on a block's chain (membar.sys, fence.sc.sys, a .sys release;
                            # c_fence_sys, 64 fences after a store: 45.7 us, the kernel floor 1.15 of it)
GPU_FENCE_US = 0.3395       # a GPU-scope one (__threadfence(); c_fence_gpu, 64: 22.9 us)
FLAG_HOP_US = 0.2216        # a flag one SM writes, seen by another spinning on it (c_pingpong, 200 rounds of
                            # two hops and one __threadfence() a block: 157.7 us)
# Fitted on one H100 row (benchmarks/results/device_program_kernels_model_check_h100.json): cub's segmented
# radix sort, 2 blocks of 12 warps, 21972 PTX warp instructions in 4.96 us, 1.12 an SM a clock where four
# schedulers could issue 4: a warp waits on its last instruction's result before the next (shared-memory
# loads, barriers, dependent arithmetic), so few warps cannot fill the schedulers.
WARP_ISSUE_CYCLES = 12 * 2 * CLOCK_GHZ * 1e3 * 4.96 / 21972   # cycles between one warp's instructions


@dataclass(frozen=True)
class KernelTime:
    """The parts of a device kernel's time (us) and which one bounds it."""
    memory_us: float
    issue_us: float
    atomic_us: float
    flags_us: float
    total_us: float
    bound: str


def resident_blocks(topo: Topology, dev: dict) -> int:
    """Blocks the GPU runs at once (threads and block slots per SM; registers and shared memory unknown)."""
    per_sm = max(1, min(BLOCKS_PER_SM, THREADS_PER_SM // max(int(dev.get("threads", 128)), 1)))
    return topo.gpu.sms * per_sm


def waves(topo: Topology, dev: dict) -> int:
    """The rounds of resident blocks the grid runs in: a block's chain of latencies is paid once a round."""
    return math.ceil(max(int(dev.get("blocks", 1)), 1) / resident_blocks(topo, dev))


def in_flight_bytes(topo: Topology, dev: dict, blocks: int) -> float:
    """Bytes `blocks` resident blocks keep in flight: one block-level load each (a Triton tl.load, a PTX ld per
    block), the average of the kernel's."""
    per_load = (dev.get("local_read", 0) + dev.get("peer_read", 0)) / max(dev.get("load_ops", 0), 1)
    return min(blocks, resident_blocks(topo, dev)) * per_load


def memory_us(topo: Topology, dev: dict, hbm_GBps: float) -> float:
    """Local memory time: each read waits a load's latency with the bytes in flight that the resident blocks
    hold (Little's law: a grid of few blocks, or of blocks with one small load each, cannot fill the memory
    system), and every byte read or written passes HBM; the two add (the latency grows as the bandwidth
    fills: a queue). A block's first round of loads waits on HBM; where the kernel's data fits the L2 (a
    program's small buffers, written just before; judged by the bytes the kernel moves, so a kernel reading a
    small buffer many times is charged HBM latency), its later rounds hit there (L2_LATENCY_US): a 2-block ring
    read looping 128 times over 128 KiB took 24.5 us on an H200, 55.0 predicted at HBM latency. The atomics a
    block waits for (kernel_report.KernelWork.chain_step: a CUDA thread's CAS, exchange or ordered atom, a
    Triton program's scalar atomic) are an L2 round trip each on its chain, in every wave of blocks: on an H100
    a Triton program's 64 system-scope CASes took 53.7 us and a CUDA thread's 57.5-61.1, each an L2 round
    trip and a system fence (sync_us)."""
    read, write = dev.get("local_read", 0), dev.get("local_write", 0)
    blocks = max(int(dev.get("blocks", 1)), 1)
    awaited = waves(topo, dev) * (dev.get("awaited_atomics", 0) + dev.get("broadcast_atomics", 0)) * L2_LATENCY_US
    if read + write == 0:
        return awaited
    flight = in_flight_bytes(topo, dev, blocks)
    rounds = read / flight if flight > 0 and dev.get("load_ops", 0) else 0.0
    later = L2_LATENCY_US if read + write < topo.gpu.l2_MB * 1e6 else LOAD_LATENCY_US
    latency = min(rounds, 1.0) * LOAD_LATENCY_US + max(rounds - 1.0, 0.0) * later
    # one-sector loads (pointers, scalars) that missed the SM's cache: each a round trip on its block's chain
    latency += dev.get("broadcast_loads", 0) / min(blocks, resident_blocks(topo, dev)) * LOAD_LATENCY_US
    return awaited + latency + (read + write) / hbm_GBps / 1e3


def issue_us(topo: Topology, dev: dict) -> float:
    """Instruction issue time on the SMs the grid occupies, each issuing four warp instructions a clock where
    it holds warps enough, else one a warp every WARP_ISSUE_CYCLES (a kernel of one or two small blocks is
    bound by its warps' latency, not the schedulers); left out for a kernel that spun (its count holds the
    simulator's spin iterations, which depend on the simulated schedule)."""
    if dev.get("polled"):
        return 0.0
    blocks = max(int(dev.get("blocks", 1)), 1)
    sms = min(topo.gpu.sms, blocks)
    per_sm = min(math.ceil(blocks / sms), resident_blocks(topo, dev) // topo.gpu.sms)
    warps = per_sm * math.ceil(max(int(dev.get("threads", 128)), 1) / 32)
    rate = min(ISSUE_PER_SM_CLOCK, warps / WARP_ISSUE_CYCLES)
    return dev.get("warp_instructions", 0) / (sms * rate * CLOCK_GHZ * 1e3)


def atomic_us(dev: dict) -> float:
    """Atomics spread over addresses run at the L2's atomic rate (fire-and-forget reductions three times
    faster than value-returning atomics); on one address they serialise."""
    return max(dev.get("atomics", 0) / ATOMICS_PER_US, dev.get("reductions", 0) / REDUCTIONS_PER_US,
               dev.get("atomic_hot", 0) * HOT_ATOMIC_US, dev.get("reduction_hot", 0) * HOT_REDUCTION_US)


_SYNC_DEFAULTS = {"sys_fence": SYS_FENCE_US, "gpu_fence": GPU_FENCE_US, "flag_hop": FLAG_HOP_US}


def sync_cost(topo: Topology, part: str) -> float:
    """A fence's or a local flag hop's cost on this GPU: its topology's measured figure (`[gpu] sync_us`: the
    H200 runs them 25-32% faster than the H100 these constants were fitted on), else the H100's."""
    return topo.gpu.sync_us.get(part, _SYNC_DEFAULTS[part])


def sync_us(topo: Topology, dev: dict, remote_hop_us: float) -> float:
    """A block's synchronisation chain: its flag hops (local ones through L2, waits for a peer at
    `remote_hop_us`), then, in every wave of blocks, a round trip for each wait's first read (a flag already
    set still costs its read: an H100 took 12.0 us for 64 waits that passed at once, 3.7 for 16) and each
    fence, which waits until the block's writes are visible at its scope (on an H100, 64 .sys release stores
    took as long as 64 system fences, 45.4 and 45.7 us; 64 __threadfence() 22.9)."""
    return (dev.get("local_hops", 0) * sync_cost(topo, "flag_hop") + dev.get("remote_waits", 0) * remote_hop_us
            + waves(topo, dev) * (dev.get("ready_polls", 0) * L2_LATENCY_US
                                  + dev.get("sys_fences", 0) * sync_cost(topo, "sys_fence")
                                  + dev.get("gpu_fences", 0) * sync_cost(topo, "gpu_fence")))


def kernel_time(topo: Topology, dev: dict, model: dict, remote_hop_us: float, comm_sms: int = 0) -> KernelTime:
    """The kernel's own time: the largest of memory, issue and atomics (they overlap), at least the kernel
    floor, plus its synchronisation chain (sync_us), which the floor does not hide: on an H100, chains of 16 and
    64 waits, fences, .sys CASes or ping-pong rounds all extrapolate to 0.5-1.0 us at none, about the floor
    (1.15 us); stretched while communication kernels hold SMs."""
    c = model["compute"]
    hbm = topo.gpu.hbm_GBps * c["memory_efficiency"]
    parts = {"memory": memory_us(topo, dev, hbm), "issue": issue_us(topo, dev), "atomics": atomic_us(dev)}
    flags = sync_us(topo, dev, remote_hop_us)
    bound = max(parts, key=parts.get)
    body = max(parts.values())
    if flags > body:
        bound = "flags"
    total = max(body, c["min_kernel_us"]) + flags
    free = max(topo.gpu.sms - comm_sms, 1)
    total *= topo.gpu.sms / free
    return KernelTime(parts["memory"], parts["issue"], parts["atomics"], flags, total, bound)


def peer_read_cap_GBps(topo: Topology, dev: dict, remote_latency_us: float) -> float:
    """The most a kernel's blocks can pull from peers: their loads in flight over the remote round trip."""
    flight = in_flight_bytes(topo, dev, max(int(dev.get("blocks", 1)), 1))
    return flight / remote_latency_us / 1e3 if flight > 0 and remote_latency_us > 0 else math.inf

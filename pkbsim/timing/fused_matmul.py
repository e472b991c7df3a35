"""symm_mem's fused all-gather+matmul and matmul+reduce-scatter (PyTorch async-TP) as the pipeline they run.

The GEMM runs one chunk per rank on the SMs while the copy engines move the other ranks' chunks, so the
communication hides behind the GEMM except where the pipeline cannot: an all-gather's last shard is multiplied
after it lands, a reduce-scatter sends nothing before its first chunk is computed, and a reduce-scatter then
sums the world-size partial chunks it received. Hence end = max(GEMM, one chunk's GEMM + communication), plus
that sum. The reference runs its collective and GEMM back to back; timing the fused op the same way (as the
replay did) predicted exactly 1.00x for both fused solutions, whose gain is the overlap.
"""
from __future__ import annotations

from dataclasses import dataclass

from pkbsim.timing.compute import kernel_us
from pkbsim.timing.topology import Topology

GATHER, SCATTER = "fused_all_gather_matmul", "fused_matmul_reduce_scatter"
FUSED = frozenset({GATHER, SCATTER})


@dataclass(frozen=True)
class Pipeline:
    """A fused op's GEMM and the parts of it that do not overlap its communication (us)."""
    gemm_us: float
    lead_us: float       # GEMM before the communication can start (reduce-scatter: its first chunk)
    last_us: float       # GEMM after the communication ends (all-gather: the last shard's chunk)
    epilogue_us: float   # after both (reduce-scatter: the local sum of the received partial chunks)

    def end(self, start: float, comm_end: float) -> float:
        """When the fused op ends, having started at `start` and finished its communication at `comm_end`."""
        return max(start + self.gemm_us, comm_end + self.last_us) + self.epilogue_us

    def gemm_bound(self, start: float, comm_end: float) -> bool:
        """Whether the GEMM, not the communication, set the end."""
        return start + self.gemm_us >= comm_end + self.last_us


def pipeline(topo: Topology, model: dict, name: str, matmul: dict, comm_bytes: int, ranks: int,
             dtype: str, comm_sms: int = 0) -> Pipeline:
    """The pipeline of fused op `name` whose matmul record is `matmul` and whose collective moves `comm_bytes`
    (nccl-tests sizes: the gathered output, or the whole partial product that is reduce-scattered)."""
    gemm = kernel_us(topo, matmul.get("flops", 0), matmul.get("bytes_read", 0) + matmul.get("bytes_written", 0),
                     matmul.get("dtype", dtype), model, comm_sms)
    chunk = gemm / ranks
    if name == GATHER:
        return Pipeline(gemm, 0.0, chunk, 0.0)
    summed = comm_bytes + comm_bytes / ranks      # reads the ranks' partial chunks, writes one
    return Pipeline(gemm, chunk, 0.0, kernel_us(topo, 0, summed, dtype, model, comm_sms))

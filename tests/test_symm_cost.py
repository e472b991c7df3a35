"""The cost stage on symmetric-memory solutions: full-size shape runs, the simulator's own polls kept off the
timeline, symm_mem's fused ops with their matmul FLOPs and its all-reduces without meta kernels."""
import pathlib

import pytest

from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.timing.topology import load_topology
from tasks.registry import get

SOLUTIONS = pathlib.Path(__file__).parent.parent / "tasks" / "solutions"


def _predict(task: str):
    res = screen(get(task), str(SOLUTIONS / f"{task}.py"), ScreenOptions(4, load_topology("hgx-h100"), seed=5))
    # a known-good solution may still be predicted slower than NCCL (ring_shift says 0.75-0.8x of itself):
    # the prediction is what is checked here, so a cost-stage 'slower' is as good as a pass
    slower = res.stage == "cost" and [r.kind for r in res.reasons] == ["slower"]
    assert res.verdict.value == "pass" or slower, res.reasons
    return res.predicted


@pytest.mark.parametrize("task", ["all_gather", "ring_shift", "gemm_allreduce_row_parallel",
                                  "allgather_gemm_column_parallel"])
def test_symmetric_memory_candidates_are_predicted_at_full_size(task):
    p = _predict(task)
    assert not any("shape run failed" in n for n in p.notes), p.notes
    assert not any(k["name"] == "_local_scalar_dense" for k in p.critical_path), p.critical_path


@pytest.mark.parametrize("task", ["allgather_gemm_column_parallel", "gemm_reduce_scatter_row_parallel"])
def test_fused_gemm_is_timed_with_its_matmul_and_hides_its_collective(task):
    """The reference runs its collective and GEMM back to back; the fused op does both, its GEMM chunks
    overlapping the communication: faster, but never by skipping the GEMM (before: exactly 1.00x, timed back
    to back; at 4 ranks now 1.22x and 1.16x)."""
    p = _predict(task)
    assert 1.1 < p.speedup < 2.0, (p.reference_us, p.candidate_us)
    assert p.bottleneck == "compute-bound"

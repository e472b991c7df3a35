"""The model against published measurements: every point meets its target but the known misses, and the
data is honest."""
import pytest

from pkbsim.timing.fidelity import evaluate, harness_us, load_points
from pkbsim.timing.host_model import host_model
from pkbsim.timing.topology import load_topology

# Held-out TP=4 points from vLLM's benchmark that the model misses (docs/timing_model.md says why): NCCL,
# where nccl-tests measured the same configuration 17-29% slower than vLLM did, and PyTorch's two-shot kernel.
KNOWN_MISSES = {"h100x4-nccl-4m", "h100x4-twoshot-4m"}


def test_points_meet_their_targets_except_the_known_misses():
    rows = evaluate()
    missed = {r.id for r in rows if r.meets_target is False}
    assert missed == KNOWN_MISSES
    judged = [r for r in rows if r.meets_target is not None]
    assert len(judged) >= 35
    bandwidth = [r for r in judged if r.regime == "bandwidth" and r.id not in KNOWN_MISSES]
    assert all(abs(r.error_pct) <= 10 for r in bandwidth)


def test_every_point_has_a_source_and_most_are_held_out():
    points = load_points()
    assert all(p["source"] and p["role"] in ("fitted", "held-out", "context") for p in points)
    fitted = [p for p in points if p["role"] == "fitted"]
    assert len(fitted) == 4 and all(p.get("note") for p in fitted)   # each fitted point names the constant it set
    assert sum(p["role"] == "held-out" for p in points) >= 35
    covered = {p["topology"] for p in points}
    assert {"hgx-h100", "hgx-h200", "hgx-a100", "hgx-b200", "gb200-nvl72", "pcie-8gpu", "h100-ib-2node"} <= covered


def test_vllm_symm_mem_harness_adds_the_staging_copies_around_the_kernel():
    topo, model = load_topology("hgx-h100"), host_model()
    nbytes = 64 << 20
    extra = harness_us(topo, model, "vllm-symm-mem", nbytes) - harness_us(topo, model, "cuda-graph", nbytes)
    one_copy_us = 2 * nbytes / (topo.gpu.hbm_GBps * 1e3 * model["compute"]["memory_efficiency"])  # read + write
    assert extra == pytest.approx(2 * (one_copy_us + model["launch"]["cuda_graph_us"]))
    assert harness_us(topo, model, "nccl-tests", nbytes) == 0.0

"""The model against published measurements: every point meets its target but the known misses, and the
data is honest."""
import dataclasses

import pytest

from pkbsim.timing.fidelity import evaluate, harness_us, host_floor_us, load_points
from pkbsim.timing.host_model import host_model
from pkbsim.timing.predict import predict
from pkbsim.timing.topology import load_topology
from pkbsim.timing.units import parse_size

# Held-out points the model misses (docs/timing_model.md says why): vLLM's TP=4 NCCL and two-shot rows, where
# nccl-tests measured the same NCCL configuration 17-29% slower than vLLM did; and the 4xH100 nccl-tests
# ring all_gather / reduce_scatter from 4 MiB to 1 GiB, 19-29% slower than NCCL's own cost model (and pkb).
KNOWN_MISSES = {"h100x4-nccl-4m", "h100x4-twoshot-4m", "h100x4-ntag-4mib", "h100x4-ntag-16mib", "h100x4-ntag-64mib",
                "h100x4-ntrs-4mib", "h100x4-ntrs-64mib", "h100x4-ntrs-1gib"}


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
    assert len(fitted) == 6 and all(p.get("note") for p in fitted)   # each fitted point names the constant it set
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


def _point(pid: str) -> dict:
    return next(p for p in load_points() if p["id"] == pid)


def test_one_thread_launching_four_gpus_floors_small_collectives():
    """nccl-tests -g 4 issues 4 launches per iteration from one thread: small all_gathers take about 4
    launches (held out), which the kernel time alone (the old model: nothing for nccl-tests) misses."""
    model, topo = host_model(), load_topology("hgx-h100")
    rows = {r.id: r for r in evaluate()}
    for pid in ("h100x4-ntag-64b", "h100x4-ntrs-64b", "h100x4-nt-64kib"):
        p = _point(pid)
        assert p["role"] == "held-out" and p["harness"] == "nccl-tests" and rows[pid].meets_target
        kernel = predict(topo, p["op"], parse_size(p["size"]), p["nranks"]).time_us
        assert host_floor_us(model, p) > kernel                          # the floor, not the kernel, is the time
        assert abs(kernel - p["measured"]) > max(5.0, 0.3 * p["measured"])   # the old model missed
    assert host_floor_us(model, _point("h100x4-ntgraph-8")) == 0.0       # graph replay: no per-launch host work
    assert all(p["harness"] == "nccl-tests" for p in load_points() if "gpus_per_thread" in p)


def test_ring_all_gather_moves_less_than_the_ring_all_reduce():
    """NCCL's ring all_gather kernel reaches 350 GB/s busBW on 8xH100 (fitted); the 4-GPU sweep is held out:
    at 1 GiB the ring's full bandwidth (efficiency 1.0, the old model) is more than 10% fast."""
    topo = load_topology("hgx-h100")
    full = dataclasses.replace(topo, nccl={**topo.nccl, "ring_allgather_efficiency": 1.0})
    assert predict(topo, "all_gather", 8 << 30, 8).busbw_GBps == pytest.approx(350.0, rel=0.01)
    assert predict(topo, "reduce_scatter", 8 << 30, 8).busbw_GBps == predict(full, "reduce_scatter", 8 << 30, 8).busbw_GBps
    measured = _point("h100x4-ntag-1gib")["measured"]
    assert abs(predict(topo, "all_gather", 1 << 30, 4).time_us / measured - 1) <= 0.10
    assert abs(predict(full, "all_gather", 1 << 30, 4).time_us / measured - 1) > 0.10


def test_peer_memory_kernels_meet_25_percent_from_1_mib():
    """Issue 19's evidence 2: PyTorch's symmetric-memory one-shot/two-shot/multimem all-reduces (vLLM's tables,
    context rows included) within 25% at >= 1 MiB. Their unicast bandwidth (kernel_GBps) is the one the
    replay gives a candidate's peer reads and writes, which is why the screen no longer marks them uncertain."""
    custom = [r for r in evaluate() if r.algorithm in ("one_shot", "two_shot", "nvls_custom") and r.bytes >= 1 << 20]
    assert len(custom) >= 12 and {"two_shot", "nvls_custom"} <= {r.algorithm for r in custom}
    assert all(abs(r.error_pct) <= 25 for r in custom), [(r.id, round(r.error_pct, 1)) for r in custom]

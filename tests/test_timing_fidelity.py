"""The model against published measurements: every point meets its target but the known misses, and the
data is honest."""
import dataclasses

import pytest

from pkbsim.timing.fidelity import evaluate, harness_us, host_floor_us, load_points
from pkbsim.timing.host_model import host_model
from pkbsim.timing.predict import predict
from pkbsim.timing.topology import load_topology
from pkbsim.timing.units import parse_size

# Held-out points the model misses (docs/timing_model.md says why): vLLM's TP=4 NCCL row, where nccl-tests
# measured the same NCCL configuration 17-29% slower than vLLM did; and the 4xH100 nccl-tests ring all_gather /
# reduce_scatter from 4 MiB to 1 GiB, 19-29% slower than NCCL's own cost model (and pkb). (vLLM's TP=4 two-shot
# row, +22%, is a device-side kernel and judged against issue 19's 25%, not NCCL's 10%.)
# Device-side misses (25% rule): none. (The 8-rank one-shot all-reduce at 1 MiB of the kraken/helion table
# and NCCL's symmetric reduce-scatter at 2 MiB were, until torch's one-shot base and the kernel-time harness's
# loop gap: see the tests below.)
DEVICE_MISSES: set[str] = set()
KNOWN_MISSES = {"h100x4-nccl-4m", "h100x4-ntag-4mib", "h100x4-ntag-16mib", "h100x4-ntag-64mib",
                "h100x4-ntrs-4mib", "h100x4-ntrs-64mib", "h100x4-ntrs-1gib"} | DEVICE_MISSES


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
    assert len(fitted) == 8 and all(p.get("note") for p in fitted)   # each fitted point names the constant it set
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


def test_the_four_gpu_mid_size_all_gather_gap_is_absent_at_eight_gpus():
    """The 4 x H100 nccl-tests ring all_gather at 4-64 MiB is 17-29% slower than predicted (pinned misses); NCCL's
    ring all_gather kernel on 8 x H100 (device time, Megatron-LM PR #5596) is within 6% at 8 to 128 MiB, and
    slower than predicted by no more. A fixed cost or slow ramp added to the ring model for the 4-GPU points
    (17-29%) would break these, so neither is added."""
    rows = {r.id: r for r in evaluate()}
    assert all(rows[i].error_pct < -15 for i in ("h100x4-ntag-4mib", "h100x4-ntag-16mib", "h100x4-ntag-64mib"))
    eight = [rows[f"h100x8-mfsdp-ag-ring-{m}m"] for m in (2, 8, 32, 128)]
    assert all(r.algorithm == "ring" and r.error_pct > -6 for r in eight)
    assert all(abs(r.error_pct) <= 8 for r in eight if r.bytes >= 8 << 20)


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
    custom = [r for r in evaluate() if r.algorithm in ("one_shot", "two_shot", "nvls_custom") and r.bytes >= 1 << 20
              and r.id not in DEVICE_MISSES]
    assert len(custom) >= 12 and {"two_shot", "nvls_custom"} <= {r.algorithm for r in custom}
    assert all(abs(r.error_pct) <= 25 for r in custom), [(r.id, round(r.error_pct, 1)) for r in custom]


def test_torchs_one_shot_pays_its_barriers_measured_fixed_cost():
    """torch's one-shot (plain peer loads between two barriers of .sys CASes, proto Simple) has a fixed cost of its
    own, measured at 8 KiB (the row symm_one_shot_base_us is fitted on): from 1 to 2 MiB the measured time grows at
    the model's peer bandwidth (within 5%), so the fixed cost is what the 1 MiB rows lacked. The buggy twin, the
    same points on NCCL's LL one-shot base: 12-15 us short, past 25% at 1 MiB. NCCL's own symmetric one-shot keeps
    the LL base."""
    rows = {r.id: r for r in evaluate()}
    topo = load_topology("hgx-h100")
    for lib in ("kraken", "torch"):
        small, big = rows[f"h100x8-{lib}-1shot-1m"], rows[f"h100x8-{lib}-1shot-2m"]
        measured_GBps = 7 * (big.bytes - small.bytes) / (big.measured - small.measured) / 1e3
        model_GBps = 7 * (big.bytes - small.bytes) / (big.predicted - small.predicted) / 1e3
        assert measured_GBps == pytest.approx(model_GBps, rel=0.05)
        assert small.protocol == "Simple" and small.meets_target and big.meets_target
        window = host_model()["launch"]["event_window_us"]
        ll = predict(topo, "all_reduce", small.bytes, 8, algo="one_shot", proto="LL").time_us
        simple = predict(topo, "all_reduce", small.bytes, 8, algo="one_shot", proto="Simple").time_us
        assert simple - ll == pytest.approx(topo.nccl["symm_one_shot_base_us"] - topo.nccl["sym_base_latency_us"][0])
        assert small.predicted == pytest.approx(simple + window)
        assert (small.measured - (ll + window)) / small.measured > 0.25   # the twin: NCCL's LL base, a miss
    assert predict(topo, "all_reduce", 8, 8, algo="one_shot").protocol == "LL"   # NCCL's choice: its LL kernel
    assert rows["h100x8-torch-1shot-8k"].role == "fitted"
    assert rows["h100x8-torch-1shot-128k"].meets_target


def test_a_profilers_kernel_time_leaves_out_the_loop_gap_nccls_model_holds():
    """A profiler's kernel duration (cross-rank minimum; Megatron-LM PR #5596) is NCCL's model less the gap a
    back-to-back loop holds (nccl_loop_gap_us, fitted on the ring all_gather at 2 MiB). The 13 held-out points
    of that table, NCCL's ring and symmetric all_gather and reduce_scatter from 2 to 128 MiB, meet their targets;
    the twin, the same points charged the whole model (the harness as it was), misses the symmetric
    reduce-scatter at 2 MiB (+34%) and the ring all_gather at 8 MiB (+15%) and is further off on average."""
    model = host_model()
    gap = model["launch"]["nccl_loop_gap_us"]
    assert harness_us(load_topology("hgx-h100"), model, "kernel-time", 1 << 20) == -gap
    table = [r for r in evaluate() if r.harness == "kernel-time"]
    held = [r for r in table if r.role == "held-out"]
    assert len(table) == 14 and len(held) == 13 and all(r.meets_target is not False for r in held)
    whole = {r.id: (r.predicted + gap - r.measured) / r.measured * 100 for r in held}
    assert whole["h100x8-mfsdp-rs-symm-2m"] > 25 and whole["h100x8-mfsdp-ag-ring-8m"] > 10
    mean = sum(abs(r.error_pct) for r in held) / len(held)
    assert mean < sum(abs(e) for e in whole.values()) / len(held) / 2


def test_event_timed_points_pay_the_event_window_not_a_graph_launch():
    """kraken's benchmark puts CUDA events around each eager call behind a memset: the window (event records, the
    kernel's dispatch) is what benchmarks/event_window.py measured, charged once per call; a graph-launched
    point pays the graph's per-kernel cost instead."""
    model = host_model()
    topo = load_topology("hgx-h100")
    events = harness_us(topo, model, "cuda-events", 1 << 20)
    assert events == model["launch"]["event_window_us"] > harness_us(topo, model, "cuda-graph", 1 << 20)
    rows = {r.id: r for r in evaluate()}
    points = {p["id"]: p for p in load_points()}
    for lib in ("kraken", "torch"):
        row = rows[f"h100x8-{lib}-1shot-2m"]
        assert points[row.id]["harness"] == "cuda-events"
        graph = predict(topo, "all_reduce", row.bytes, 8, algo="one_shot", proto="Simple").time_us + harness_us(
            topo, model, "cuda-graph", row.bytes)
        assert row.predicted == pytest.approx(graph - model["launch"]["cuda_graph_us"] + events)


def test_device_side_points_from_other_libraries_are_judged_at_25_percent():
    """Issue 19's evidence 2 beyond PyTorch: MSCCL++'s CI baselines (8 x A100: SM two-shot all-reduce, copy-engine
    all-gather and all-to-all) and a Triton symmetric-memory all-gather on 8 x B200, each with the commit or PR it
    came from; judged by the 25% rule from 1 MiB on and by nothing else (the 10% NCCL target does not apply)."""
    rows = {r.id: r for r in evaluate()}
    points = {p["id"]: p for p in load_points()}
    new = [i for i in points if i.startswith(("a100x8-msccl", "h100x8-msccl", "b200x8-tritonag"))]
    assert len(new) >= 13
    for i in new:
        p, r = points[i], rows[i]
        assert ("mscclpp" in p["source"] and "1f5f065d7b13ab02df32c22568f38785d1eeec01" in p["source"]) or \
            "facebookexperimental/triton PR #2361" in p["source"]
        assert p.get("note") and r.device_side
        if r.role != "context" and r.bytes >= 1 << 20:
            assert r.regime == "device" and r.target == "25%" and r.meets_target, (i, round(r.error_pct, 1))
    judged = [r for r in rows.values() if r.device_side and r.regime == "device" and r.meets_target is not None]
    assert len(judged) >= 18 and {r.id for r in judged if not r.meets_target} == DEVICE_MISSES
    assert {r.topology for r in judged} >= {"hgx-h100", "hgx-a100", "hgx-b200"}


def test_one_shot_all_gather_moves_each_shard_once_at_the_peer_kernel_bandwidth():
    """all_gather one_shot (every GPU copies each peer's shard at once) did not exist before (ValueError): time is
    the non-LL symmetric-kernel base latency plus (n-1)/n of the output through min(peer-kernel cap, NVLink port)."""
    from pkbsim.timing.plans import kernel_GBps
    for name in ("hgx-b200", "hgx-h100", "hgx-a100"):
        topo, n, nbytes = load_topology(name), 8, 1 << 30
        p = predict(topo, "all_gather", nbytes, n, algo="one_shot")
        port = topo.nvlink.links_per_gpu * topo.nvlink.link_GBps * topo.nvlink.efficiency
        bw = min(kernel_GBps(topo, "one_shot", None)[0], port)
        expect = topo.nccl["sym_base_latency_us"][1] + (n - 1) / n * nbytes / bw / 1e3
        assert p.algorithm == "one_shot" and p.protocol == "Simple"
        assert p.time_us == pytest.approx(expect, rel=0.02), name
        assert predict(topo, "all_gather", nbytes, n, algo="one_shot", engine="flow").time_us == \
            pytest.approx(p.time_us, rel=0.01)
    # NCCL's own selection never picks it (by --algo only)
    assert predict(load_topology("hgx-h100"), "all_gather", 1 << 30, 8).algorithm != "one_shot"

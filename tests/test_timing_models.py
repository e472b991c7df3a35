"""Collective models against their closed forms, NCCL's constants, and the expected monotonicity."""
import dataclasses

import pytest

from pkbsim.timing.closed_form import choose, plan_time_us
from pkbsim.timing.flowsim import simulate_plan
from pkbsim.timing.nccl import latency_us, layout
from pkbsim.timing.plans import build_plan
from pkbsim.timing.predict import predict, router_for
from pkbsim.timing.routes import Router
from pkbsim.timing.topology import load_topology
from pkbsim.timing.units import bus_factor, parse_size

H100 = load_topology("hgx-h100")
GiB = 1 << 30


@pytest.mark.parametrize("topo, op, algo, proto, n, size", [
    ("hgx-h100", "all_reduce", "ring", "Simple", 8, GiB),
    ("hgx-h100", "all_reduce", "ring", "LL", 8, 1 << 20),
    ("hgx-h100", "all_reduce", "ring", "LL128", 5, 64 << 20),
    ("hgx-h100", "all_gather", "ring", "Simple", 8, GiB),
    ("hgx-h100", "reduce_scatter", "nvls", "Simple", 8, GiB),
    ("hgx-h100", "all_reduce", "nvls", "Simple", 6, 256 << 20),
    ("hgx-h100", "broadcast", "ring", "Simple", 8, GiB),
    ("hgx-h100", "all_to_all", "p2p", "Simple", 8, GiB),
    ("hgx-h100", "sendrecv", "p2p", "Simple", 8, GiB),
    ("hgx-h100", "all_reduce", "one_shot", "LL", 8, 1 << 20),
    ("hgx-h100", "all_reduce", "two_shot", "Simple", 4, 16 << 20),
    ("hgx-h100", "all_reduce", "nvls_custom", "Simple", 8, 16 << 20),
    ("pcie-8gpu", "all_reduce", "ring", "Simple", 8, GiB),
    ("h100-ib-2node", "all_reduce", "ring", "Simple", 16, GiB),
    ("h100-ib-2node", "all_to_all", "p2p", "Simple", 16, GiB),
    ("gb200-nvl72", "all_reduce", "nvls", "Simple", 72, GiB),
])
def test_flow_model_equals_closed_form_for_symmetric_collectives(topo, op, algo, proto, n, size):
    t = load_topology(topo)
    r = router_for(t)
    plan = build_plan(t, r, op, size, list(range(n)), algo, proto)
    simulated, net = simulate_plan(plan, r, record=True)
    assert simulated == pytest.approx(plan_time_us(plan, r), rel=1e-6)
    sent = sum(sum(ph.payload) for ph in plan.phases) * plan.wire
    per_flow = [len(route) for ph in plan.phases for route in ph.routes]
    loaded = sum(b * k for ph in plan.phases for b, k in zip(ph.payload, map(len, ph.routes))) * plan.wire
    assert net.carried[:r.pad].sum() == pytest.approx(loaded, rel=1e-9)   # every byte crossed every hop
    assert sent > 0 and min(per_flow) >= 1


def test_asymmetric_plans_never_exceed_their_static_bound():
    t = load_topology("h100-ib-2node")
    r = router_for(t)
    plan = build_plan(t, r, "all_reduce", GiB, list(range(16)), "tree", "Simple")
    assert simulate_plan(plan, r)[0] <= plan_time_us(plan, r) * (1 + 1e-9)


def test_closed_forms_of_the_textbook_algorithms():
    b = H100.nvlink.port_GBps * 1e3   # bytes per µs
    n, s = 8, 8 * GiB
    ring = predict(H100, "all_reduce", s, n, algo="ring", proto="Simple")
    lat = 8.4 + 2 * (n - 1) * 3.4
    assert ring.time_us == pytest.approx(lat + 2 * (n - 1) / n * s / b, rel=1e-9)
    nvls = predict(H100, "all_reduce", s, n, algo="nvls")
    step = n * 16 * 131072
    assert nvls.time_us == pytest.approx(25.0 + (s + step) * (n + 1) / n / (0.85 * b), rel=1e-9)
    a2a = predict(H100, "all_to_all", s, n)
    assert a2a.time_us == pytest.approx(8.4 + 3.4 + (n - 1) / n * s / b, rel=1e-9)


def test_nccl_latency_table():
    lay = layout(H100, list(range(8)))
    assert latency_us(H100, "all_reduce", "ring", "LL", lay, 8, 1) == pytest.approx(6.6 + 14 * 0.6)
    assert latency_us(H100, "all_reduce", "tree", "LL", lay, 8, 1) == pytest.approx(6.8 + 2 * 7 * 0.6)
    two = load_topology("h100-ib-2node")
    lay2 = layout(two, list(range(16)))
    assert latency_us(two, "all_reduce", "ring", "LL", lay2, 8, 1) == pytest.approx(6.6 + 28 * 1.0 + 2 * 2.7)


def test_selection_follows_nccl_small_to_large():
    picks = {s: (p.algorithm, p.protocol) for s in ("8", "1MiB", "4MiB", "1GiB")
             for p in [predict(H100, "all_reduce", parse_size(s), 8)]}
    assert picks["8"] == ("ring", "LL") and picks["1MiB"] == ("ring", "LL") and picks["1GiB"] == ("nvls", "Simple")
    assert predict(load_topology("hgx-a100"), "all_reduce", GiB, 8).algorithm == "ring"   # no NVLS on A100
    choice = choose(H100, router_for(H100), "all_reduce", GiB, list(range(8)))
    assert choice.time_us == min(choice.candidates.values()) and len(choice.candidates) == 7


def test_time_grows_with_size_and_falls_with_bandwidth():
    sizes = [1 << k for k in range(0, 34, 3)]
    for topo, n in (("hgx-h100", 8), ("pcie-8gpu", 8), ("h100-ib-2node", 16)):
        t = load_topology(topo)
        for op in ("all_reduce", "all_gather", "all_to_all"):
            times = [predict(t, op, s, n).time_us for s in sizes]
            assert times == sorted(times), (topo, op)
    faster = dataclasses.replace(H100, nvlink=dataclasses.replace(H100.nvlink, efficiency=0.95), name="fast",
                                 path="fast")
    for s in (1 << 20, 64 << 20, GiB):
        assert predict(faster, "all_reduce", s, 8).time_us <= predict(H100, "all_reduce", s, 8).time_us
    assert predict(faster, "all_reduce", GiB, 8).time_us < predict(H100, "all_reduce", GiB, 8).time_us


def test_custom_kernels_are_limited_by_their_ctas():
    few = predict(H100, "all_reduce", 64 << 20, 8, algo="two_shot", ctas=1)
    many = predict(H100, "all_reduce", 64 << 20, 8, algo="two_shot")
    assert few.time_us > 4 * many.time_us


def test_forced_choices_that_cannot_run_say_why():
    with pytest.raises(ValueError, match="NVLS needs NVSwitch multicast"):
        predict(load_topology("hgx-a100"), "all_reduce", GiB, 8, algo="nvls")
    with pytest.raises(ValueError, match="nvls runs with Simple only"):
        predict(H100, "all_reduce", GiB, 8, algo="nvls", proto="LL")
    with pytest.raises(ValueError, match="holds 8 GPUs"):
        predict(H100, "all_reduce", GiB, 9)


def test_busbw_uses_nccl_tests_factors():
    p = predict(H100, "all_gather", GiB, 8)
    assert p.busbw_GBps == pytest.approx(p.algbw_GBps * bus_factor("all_gather", 8)) and bus_factor("all_gather", 8) == 7 / 8
    assert parse_size("64MiB") == parse_size("64M") == 64 << 20 and parse_size("1GB") == 10**9
    with pytest.raises(ValueError, match="cannot read size"):
        parse_size("12 parsecs")


def test_router_is_built_once_per_machine():
    assert router_for(H100) is router_for(load_topology("hgx-h100"))
    assert isinstance(router_for(H100), Router)


def test_one_rank_is_a_local_copy():
    p = predict(H100, "all_reduce", GiB, 1)
    assert p.algorithm == "local" and p.time_us == pytest.approx(2 * GiB / (H100.gpu.hbm_GBps * 1e3))

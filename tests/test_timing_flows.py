"""The max-min solver and the SimPy flow network: fairness, conservation, and event batching."""
import numpy as np
import pytest
import simpy

from pkbsim.timing import relevel as relevel_module
from pkbsim.timing.maxmin import fill, max_min_rates
from pkbsim.timing.network import FlowNetwork
from pkbsim.timing.relevel import relevel, solve

INF = np.inf


def test_classic_max_min_example():
    # links 0 (cap 10) and 1 (cap 4); flow A uses both, B only link 0, C only link 1
    caps = np.array([10.0, 4.0, INF])
    routes = np.array([[0, 1], [0, 2], [1, 2]])
    rates = max_min_rates(routes, caps, np.full(3, INF))
    assert rates == pytest.approx([2.0, 8.0, 2.0])


def test_flow_caps_leave_bandwidth_to_others():
    rates = max_min_rates(np.array([[0], [0], [0]]), np.array([9.0, INF]), np.array([1.0, INF, INF]))
    assert rates == pytest.approx([1.0, 4.0, 4.0])


def random_routes(rng, nres, nflows):
    """Up to 3 distinct hops each, padded with index nres (capacity inf)."""
    routes = np.full((nflows, 3), nres)
    for f in range(nflows):
        hops = rng.choice(nres, size=min(rng.integers(1, 4), nres), replace=False)
        routes[f, :len(hops)] = hops
    return routes


def random_instance(rng):
    """Up to 40 flows over up to 11 resources; a fifth of the flows capped."""
    nres, nflows = rng.integers(2, 12), rng.integers(1, 40)
    caps = np.append(rng.uniform(1, 100, nres), INF)
    fcap = np.where(rng.random(nflows) < 0.2, rng.uniform(1, 50, nflows), INF)
    return nres, random_routes(rng, nres, nflows), caps, fcap


def test_random_instances_are_feasible_and_max_min_optimal():
    rng = np.random.default_rng(1)
    for _ in range(50):
        nres, routes, caps, fcap = random_instance(rng)
        nflows = len(routes)
        rates = max_min_rates(routes, caps, fcap)
        load = np.bincount(routes.ravel(), weights=np.repeat(rates, 3), minlength=nres + 1)[:nres]
        assert np.all(load <= caps[:nres] * (1 + 1e-9))                      # feasible
        fastest = [rates[(routes == r).any(axis=1)].max(initial=0.0) for r in range(nres)]
        for f in range(nflows):   # every flow is at its cap or crosses a saturated link where it is among the fastest
            if rates[f] >= fcap[f] * (1 - 1e-9):
                continue
            assert any(load[r] >= caps[r] * (1 - 1e-9) and rates[f] >= fastest[r] * (1 - 1e-9)
                       for r in routes[f] if r < nres)


def test_relevel_and_warm_start_match_filling_after_flows_come_and_go():
    """The previous solve's levels (relevel.py) and the levels below the slowest removed flow (filling's warm
    start) both give the rates filling from scratch gives."""
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(200):
        nres, routes, caps, fcap = random_instance(rng)
        _, levels = fill(routes, caps, fcap)
        stay = rng.random(len(routes)) < 0.8
        new = random_routes(rng, nres, rng.integers(0, 3))   # a few flows that start
        sub, sub_cap = np.vstack([routes[stay], new]), np.append(fcap[stay], np.full(len(new), INF))
        reference = max_min_rates(sub, caps, sub_cap)
        out = relevel(sub, caps, sub_cap, levels)
        if out is not None:
            hits += 1
            assert out[0] == pytest.approx(reference, rel=1e-9)
        assert solve(sub, caps, sub_cap, levels)[0] == pytest.approx(reference, rel=1e-9)
        if not len(new):
            gone = fill(routes, caps, fcap)[0][~stay].min(initial=INF)
            kept = np.where(levels < gone * (1 - 1e-9), levels, INF)
            assert fill(sub, caps, sub_cap, kept)[0] == pytest.approx(reference, rel=1e-9)
    assert hits > 100


def test_relevel_follows_a_jittered_all_to_all_flow_by_flow():
    n = 8   # egress links 0..7, ingress links 8..15 of capacity 1, one flow per ordered pair
    pairs = np.array([(a, n + b) for a in range(n) for b in range(n) if a != b])
    caps, left = np.append(np.ones(2 * n), INF), np.random.default_rng(3).uniform(0.8, 1.2, len(pairs))
    live, levels, hits = np.ones(len(pairs), bool), None, 0
    while live.any():
        routes, fcap = pairs[live], np.full(live.sum(), INF)
        reference = max_min_rates(routes, caps, fcap)
        out = None if levels is None else relevel(routes, caps, fcap, levels)
        if out is not None:
            hits += 1
            assert out[0] == pytest.approx(reference, rel=1e-9)
        rates, levels = solve(routes, caps, fcap, levels)
        left[live] -= rates * np.min(left[live] / rates)
        live[np.flatnonzero(live)[np.argmin(left[live])]] = False
    assert hits > len(pairs) // 2


def run(procs, caps, record=True):
    env = simpy.Environment()
    net = FlowNetwork(env, np.append(caps, INF), len(caps), record=record)
    for p in procs:
        env.process(p(env, net))
    env.run()
    return env, net


def test_latency_is_paid_before_bandwidth_and_finishes_are_exact():
    seen = {}

    def p(env, net):
        yield env.timeout(3.0)   # latency first
        a = net.start(np.array([[0]]), [1000.0])
        b = net.start(np.array([[0]]), [500.0])
        yield b
        seen["b"] = env.now
        yield a
        seen["a"] = env.now
    run([p], np.array([100.0]))
    assert seen == {"b": pytest.approx(3 + 500 / 50), "a": pytest.approx(3 + 10 + 500 / 100)}


def test_bytes_delivered_equal_bytes_sent_on_every_link():
    rng = np.random.default_rng(7)
    caps = np.array([50.0, 80.0, 30.0, 120.0])
    flows = [(rng.choice(4, size=2, replace=False), rng.uniform(10, 1000), rng.uniform(0, 20)) for _ in range(60)]

    def p(route, size, delay):
        def body(env, net):
            yield env.timeout(delay)
            yield net.start(np.array([route]), [size])
        return body
    _, net = run([p(*f) for f in flows], caps)
    expected = np.zeros(4)
    for route, size, _ in flows:
        expected[route] += size
    assert net.carried[:4] == pytest.approx(expected, rel=1e-9)
    assert net.active == 0


def test_back_to_back_chunks_equal_one_flow():
    chunks = np.random.default_rng(3).uniform(0.8, 1.2, 16) * 1e6

    def chunked(env, net):
        for c in chunks:
            yield net.start(np.array([[0, 1]]), [c])

    def rival(env, net):
        yield net.start(np.array([[1]]), [5e6])
    env_a, _ = run([chunked, rival], np.array([100.0, 100.0]))

    def folded(env, net):
        yield net.start(np.array([[0, 1]]), [chunks.sum()])
    env_b, _ = run([folded, rival], np.array([100.0, 100.0]))
    assert env_a.now == pytest.approx(env_b.now, rel=1e-9)


def test_flow_network_finishes_alike_with_and_without_relevel(monkeypatch):
    sizes = np.random.default_rng(4).uniform(80, 120, (8, 8))
    pairs = [(a, b) for a in range(8) for b in range(8) if a != b]

    def finishes():
        done = {}

        def p(a, b):
            def body(env, net):
                yield net.start(np.array([[a, 8 + b]]), [sizes[a, b]])
                done[a, b] = env.now
            return body
        run([p(a, b) for a, b in pairs], np.ones(16), record=False)
        return np.array([done[pair] for pair in pairs])
    fast = finishes()
    monkeypatch.setattr(relevel_module, "relevel", lambda *args: None)   # filling only
    assert finishes() == pytest.approx(fast, rel=1e-9)


def test_one_solve_per_timestamp_for_simultaneous_flows():
    def p(env, net):
        yield net.start(np.array([[i % 4] for i in range(400)]), np.full(400, 1e6))
    _, net = run([p], np.full(4, 100.0), record=False)
    assert net.solves == 1 and net.flows_started == 400


def test_a_time_grid_batches_finishes_but_keeps_bytes_exact():
    sizes = np.random.default_rng(5).uniform(900, 1100, 40)

    def p(i):
        def body(env, net):
            yield net.start(np.array([[i % 3, 3]]), [sizes[i]])
        return body
    exact_env, exact = run([p(i) for i in range(40)], np.array([10.0, 20.0, 30.0, 50.0]))

    def grid_run(step):
        env = simpy.Environment()
        net = FlowNetwork(env, np.array([10.0, 20.0, 30.0, 50.0, INF]), 4, record=True, resolution_us=step)
        for i in range(40):
            env.process(p(i)(env, net))
        env.run()
        return env, net
    env, net = grid_run(1.0)
    assert net.solves < exact.solves
    assert net.carried[:4] == pytest.approx(exact.carried[:4], rel=1e-9)
    assert exact_env.now <= env.now <= exact_env.now + 1.0 * net.solves
    assert env.now == pytest.approx(exact_env.now, rel=0.01)

"""Unit tests of the small pieces the world is built from."""
from pkbsim.world.clocks import VectorClocks, happens_before
from pkbsim.world.findings import Finding, verdict_of
from pkbsim.world.streams import StreamOrder
from pkbsim.world.world import find_cycle


def test_find_cycle():
    assert find_cycle({0: {1}, 1: {2}, 2: {0}}) == [0, 1, 2]
    assert find_cycle({0: {1}, 1: set()}) == []
    assert find_cycle({0: {5}, 1: {2}, 2: {1}}) == [1, 2]  # rank 5 is not blocked: no edge through it


def test_vector_clocks_order_release_acquire_and_joins():
    vc = VectorClocks(3)
    put = vc.snapshot(0)
    reset = vc.snapshot(1)
    assert not happens_before(put, reset) and not happens_before(reset, put)  # concurrent
    vc.acquire(1, put)
    assert happens_before(put, vc.snapshot(1))
    vc.join([0, 1, 2])
    assert happens_before(reset, vc.snapshot(2))


def test_stream_order_needs_a_wait_after_the_write():
    so = StreamOrder()
    so.write(key=1, stream=0, site="a.py:1")
    assert so.race(1, stream=5) is not None
    so.wait_stream(5, 0)
    assert so.race(1, stream=5) is None
    so.write(key=1, stream=0, site="a.py:2")  # a newer write needs a newer wait
    assert so.race(1, stream=5)[2] == "a.py:2"
    so.record_event(event=7, stream=0)
    so.wait_event(5, 7)
    assert so.race(1, stream=5) is None


def test_verdict_prefers_the_root_cause():
    assert verdict_of([]) == "ok"
    assert verdict_of([Finding("deadlock", "x"), Finding("mismatch", "y")]) == "mismatch"
    assert verdict_of([Finding("buffering_hazard", "x")]) == "deadlock"
    assert verdict_of([Finding("race", "x"), Finding("error", "y")]) == "protocol"


def test_a_race_found_after_a_rank_failed_on_its_stale_data_is_kept_as_the_cause():
    """A reader's own check can fail on stale data before the writer's late write shows the race: the race
    still decides the verdict; a second error (a consequence) is still dropped."""
    from pkbsim.world.world import World

    w = World(2)
    w.fail(Finding("error", "rank 0 raised AssertionError: wrong all-to-all", [0]))
    w.fail(Finding("error", "rank 1 raised SimAbort", [1]), unless_failed=True)
    w.fail(Finding("race", "write after read", [0, 1]), unless_failed=True)
    w.fail(Finding("race", "a second race", [0, 1]), unless_failed=True)
    assert [f.message for f in w.findings] == ["rank 0 raised AssertionError: wrong all-to-all", "write after read"]
    assert verdict_of(w.findings) == "protocol"

"""Clock threads per stream (issue 24): a device-side `hdl.barrier()` on the default stream orders only that
stream's later work. A side stream that never waited for it reads a peer's buffer too early on a GPU, which
is a race; a wait_stream, an event, a host synchronize or a host read of device data (`.item()`) before
the read orders it (tests/programs/symm_barrier_side_stream.py, one program with a mode per twin)."""
import io
import os

import pytest
from conftest import HERE

from pkbsim.world.check import check_script
from pkbsim.world.clocks import VectorClocks, happens_before
from pkbsim.world.launcher import RunOptions

PROGRAM = os.path.join(HERE, "programs", "symm_barrier_side_stream.py")


def check(mode: str, reader: str):
    res = check_script(PROGRAM, [mode, reader], RunOptions(nproc=2, output=io.StringIO()))
    return res, [f.render() for f in res.findings]


@pytest.mark.parametrize("reader", ["copy", "triton"])
def test_a_side_stream_read_not_ordered_after_the_barrier_is_a_race(reader):
    res, found = check("bug", reader)
    assert res.verdict == "protocol" and [f.kind for f in res.findings] == ["race"], found
    assert "stale read" in found[0] and "symm_barrier_side_stream.py:56" in found[0], found


@pytest.mark.parametrize("mode,reader", [("wait_stream", "copy"), ("wait_stream", "triton"), ("event", "copy"),
                                         ("synchronize", "copy"), ("item", "copy")])
def test_a_side_stream_ordered_after_the_barrier_is_not_a_race(mode, reader):
    res, found = check(mode, reader)
    assert res.verdict == "ok", found


def test_a_barrier_acquired_on_one_stream_orders_neither_the_host_nor_another_stream():
    c = VectorClocks(2)
    published = c.release(1)  # rank 1 signals on its default stream
    c.use_stream(0, 7)
    side = c.stream_clock(0, 7)
    c.use_stream(0, 0)
    c.acquire(0, published)  # rank 0's barrier on its default stream
    assert happens_before(published, c.stream_clock(0, 0))
    assert not happens_before(published, c.stream_clock(0, 7)) and c.stream_clock(0, 7) == side
    c.host_waits_for_streams(0, [0])  # a host wait on the default stream: later side-stream work is ordered
    assert happens_before(published, c.stream_clock(0, 7))


def test_a_block_slot_used_by_another_stream_does_not_carry_its_acquires():
    c = VectorClocks(2)
    published = c.release(1)
    k = c.kernel(0)  # a kernel on the default stream: its block acquires rank 1's release
    with k.running(k.start(0)):
        c.acquire(0, published)
    k.finish()
    c.use_stream(0, 7)
    k = c.kernel(0)  # a kernel on a side stream that never waited: its block on the same slot does not see it
    t = k.start(0)
    assert not happens_before(published, tuple(c.vc[t]))
    k.finish()


def test_streams_share_slots_beyond_the_limit_and_keep_them():
    c = VectorClocks(2)
    threads = [c.stream_thread(0, s) for s in (11, 12, 13, 14, 11)]
    assert threads[0] == threads[3] == threads[4] and len(set(threads)) == 3 and 0 not in threads
    assert VectorClocks(100).stream_thread(5, 11) == 5  # large worlds: one thread per rank

"""The happens-before race detector and the address map, on hand-made IR events (no program run)."""
import torch

from pkbsim.device.ir import Event
from pkbsim.device.memory_map import MemoryMap
from pkbsim.device.races import RaceDetector
from pkbsim.symm.handle import Allocation, SymmState, storage_key
from pkbsim.world.clocks import VectorClocks


class _World:
    def __init__(self, n):
        self.size, self.clocks = n, VectorClocks(n)
        for r in range(n):
            self.clocks.vc[r][r] = 1


def _setup():
    w = _World(2)
    return w, RaceDetector(w.clocks), _alloc(0)


def _alloc(rank, n=64):
    return Allocation(rank, torch.zeros(n), torch.zeros(16, dtype=torch.int32))


def _ev(kind, rank, lo=0, hi=16, owner=0):
    return Event(kind, rank, f"prog.py:{rank}", "kernel", owner, lo, hi)


def test_unsynchronised_read_of_a_peer_write_is_a_stale_read():
    w, det, buf = _setup()
    assert det.access(buf, _ev("put", 1), write=True) is None
    earlier, what = det.access(buf, _ev("get", 0), write=False)
    assert what == "stale read" and earlier.rank == 1


def test_release_then_acquire_orders_the_write_before_the_read():
    w, det, buf = _setup()
    det.access(buf, _ev("put", 1), write=True)
    w.clocks.acquire(0, w.clocks.release(1))
    assert det.access(buf, _ev("get", 0), write=False) is None


def test_a_write_after_the_release_is_not_covered_by_it():
    w, det, buf = _setup()
    published = w.clocks.release(1)
    det.access(buf, _ev("put", 1), write=True)
    w.clocks.acquire(0, published)
    assert det.access(buf, _ev("get", 0), write=False)[1] == "stale read"


def test_overwriting_what_a_peer_may_still_read_is_a_write_after_read():
    w, det, buf = _setup()
    det.access(buf, _ev("get", 1), write=False)
    earlier, what = det.access(buf, _ev("put", 0), write=True)
    assert what == "write after read" and earlier.kind == "get"


def test_disjoint_byte_ranges_do_not_race():
    w, det, buf = _setup()
    det.access(buf, _ev("put", 1, 0, 64), write=True)
    assert det.access(buf, _ev("get", 0, 64, 128), write=False) is None


def test_a_peer_barrier_passed_by_one_block_does_not_order_its_sibling():
    """Blocks of one launch run on their own clock threads: what block 0 acquired, block 1 has not."""
    w, det, buf = _setup()
    det.access(buf, _ev("put", 1), write=True)
    published = w.clocks.release(1)
    kernel = w.clocks.kernel(0)
    b0, b1 = kernel.start(0), kernel.start(1)
    kernel.run_on(b0)
    w.clocks.acquire(0, published)
    assert det.access(buf, _ev("get", 0), write=False) is None
    kernel.run_on(b1)
    assert det.access(buf, _ev("get", 0, 0, 8), write=False)[1] == "stale read"


def test_the_end_of_a_launch_orders_every_block_before_the_rank():
    w, det, buf = _setup()
    det.access(buf, _ev("put", 1), write=True)
    published = w.clocks.release(1)
    kernel = w.clocks.kernel(0)
    kernel.run_on(kernel.start(0))
    w.clocks.acquire(0, published)
    kernel.run_on(kernel.start(1))
    kernel.finish()
    assert det.access(buf, _ev("get", 0), write=False) is None  # the rank, after the launch
    nxt = w.clocks.kernel(0)
    nxt.run_on(nxt.start(1))
    assert det.access(buf, _ev("get", 0), write=False) is None  # a block of the next launch (stream order)


def test_a_write_over_a_read_of_a_peer_block_that_was_not_synchronised_is_caught():
    """The D6 shape: rank 1's block 1 reads rank 0's buffer; rank 0 synchronised only with rank 1's block 0."""
    w, det, buf = _setup()
    kernel = w.clocks.kernel(1)
    b0, b1 = kernel.start(0), kernel.start(1)
    kernel.run_on(b1)
    det.access(buf, _ev("get", 1, 32, 48), write=False)
    kernel.run_on(b0)
    published = w.clocks.release(1)
    kernel.finish()
    w.clocks.acquire(0, published)
    earlier, what = det.access(buf, _ev("put", 0, 32, 48), write=True)
    assert what == "write after read" and earlier.rank == 1


def test_memory_map_tells_buffers_from_signal_pads():
    symm = SymmState()
    a = _alloc(3)
    symm.by_storage[storage_key(a.tensor)] = a
    symm.by_pad[storage_key(a.pad)] = a
    mm = MemoryMap(symm)
    base = a.tensor.data_ptr()
    assert mm.find(base + 8, base + 16).owner == 3 and not mm.find(base, base + 4).on_pad
    assert mm.find(a.pad.data_ptr() + 20, a.pad.data_ptr() + 24).on_pad
    assert mm.find(base + 250, base + 260) is None  # runs past the buffer's end

"""The happens-before race detector and the address map, on hand-made IR events (no program run)."""
import torch

from pkbsim.device.ir import Event
from pkbsim.device.memory_map import MemoryMap
from pkbsim.device.races import RaceDetector, release
from pkbsim.symm.handle import Allocation, SymmState, storage_key
from pkbsim.world.clocks import VectorClocks


class _World:
    def __init__(self, n):
        self.size, self.clocks = n, VectorClocks(n)
        for r in range(n):
            self.clocks.vc[r][r] = 1


def _alloc(rank, n=64):
    return Allocation(rank, torch.zeros(n), torch.zeros(16, dtype=torch.int32))


def _ev(kind, rank, lo=0, hi=16, owner=0):
    return Event(kind, rank, f"prog.py:{rank}", "kernel", owner, lo, hi)


def test_unsynchronised_read_of_a_peer_write_is_a_stale_read():
    w, det, buf = _World(2), RaceDetector(2), _alloc(0)
    assert det.access(buf, _ev("put", 1), w.clocks.vc[1], write=True) is None
    earlier, what = det.access(buf, _ev("get", 0), w.clocks.vc[0], write=False)
    assert what == "stale read" and earlier.rank == 1


def test_release_then_acquire_orders_the_write_before_the_read():
    w, det, buf = _World(2), RaceDetector(2), _alloc(0)
    det.access(buf, _ev("put", 1), w.clocks.vc[1], write=True)
    w.clocks.acquire(0, release(w, 1))
    assert det.access(buf, _ev("get", 0), w.clocks.vc[0], write=False) is None


def test_a_write_after_the_release_is_not_covered_by_it():
    w, det, buf = _World(2), RaceDetector(2), _alloc(0)
    published = release(w, 1)
    det.access(buf, _ev("put", 1), w.clocks.vc[1], write=True)
    w.clocks.acquire(0, published)
    assert det.access(buf, _ev("get", 0), w.clocks.vc[0], write=False)[1] == "stale read"


def test_overwriting_what_a_peer_may_still_read_is_a_write_after_read():
    w, det, buf = _World(2), RaceDetector(2), _alloc(0)
    det.access(buf, _ev("get", 1), w.clocks.vc[1], write=False)
    earlier, what = det.access(buf, _ev("put", 0), w.clocks.vc[0], write=True)
    assert what == "write after read" and earlier.kind == "get"


def test_disjoint_byte_ranges_do_not_race():
    w, det, buf = _World(2), RaceDetector(2), _alloc(0)
    det.access(buf, _ev("put", 1, 0, 64), w.clocks.vc[1], write=True)
    assert det.access(buf, _ev("get", 0, 64, 128), w.clocks.vc[0], write=False) is None


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

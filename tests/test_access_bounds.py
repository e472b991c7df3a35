"""The device observer takes a warp group's least and greatest address once and hands them on (`bounds`) to the
memory map's split, byte_runs and sector_bytes, which took them again each: the same answers as without them, on
random address sets (aligned or not, close or scattered, one region, several or none)."""
import bisect
import random

import numpy as np
import pytest

from pkbsim.device.accesses import byte_runs
from pkbsim.device.kernel_report import sector_bytes
from pkbsim.device.memory_map import MemoryMap


class _Alloc:
    def __init__(self, base: int, nbytes: int):
        self.base, self.nbytes = base, nbytes
        self.pad = _Pad(base + nbytes + 4096)


class _Pad:
    def __init__(self, ptr: int):
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr

    def numel(self) -> int:
        return 64


class _Symm:
    def __init__(self, allocs):
        self.by_storage = {a.base: a for a in allocs}
        self.generation = 1

    def reap(self) -> None:
        pass


def _addrs(rng: random.Random, width: int) -> np.ndarray:
    base = 1 << 20
    if rng.random() < 0.3:   # ending at, or just across, the end of the first region
        end = base + (1 << 14) - width + rng.randrange(0, 2 * width)
        return np.array(sorted({end - rng.randrange(0, 256) for _ in range(8)} | {end}), dtype=np.uint64)
    n = rng.choice((1, 3, 32, 500))
    spread = rng.choice((width * n, 64 * n, 1 << 16))
    a = np.array([base + rng.randrange(spread) for _ in range(n)], dtype=np.uint64)
    if rng.random() < 0.6:
        a -= a % np.uint64(width)
    return a


def _split_reference(allocs, addrs, width):
    """What the split means: addresses grouped by the region that starts at or below them, a group kept in it
    only if its last access ends inside (the split of 8eccb81, which searched every address)."""
    regions = sorted([(a.base, a.nbytes, a) for a in allocs] + [(a.pad.ptr, 256, ("pad", a)) for a in allocs],
                     key=lambda r: r[0])
    starts = [r[0] for r in regions]
    groups: dict = {}
    for x in addrs.tolist():
        groups.setdefault(bisect.bisect_right(starts, x) - 1, []).append(x)
    out = []
    for i, xs in sorted(groups.items()):
        inside = i >= 0 and max(xs) + width <= regions[i][0] + regions[i][1]
        out.append((regions[i][2] if inside else None, xs))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_bounds_given_change_nothing(seed):
    rng = random.Random(seed)
    allocs = [_Alloc(1 << 20, 1 << 14), _Alloc((1 << 20) + (1 << 15), 1 << 14)]
    memory = MemoryMap(_Symm(allocs))
    for _ in range(50):
        width = rng.choice((1, 2, 4, 8, 16))
        a = _addrs(rng, width)
        bounds = int(a.min()), int(a.max())
        aligned = not int(np.bitwise_or.reduce(a)) & (width - 1)
        assert byte_runs(a, width, aligned, bounds) == byte_runs(a, width, aligned)
        assert sector_bytes(a, width, aligned, bounds) == sector_bytes(a, width, aligned)
        with_b, without = memory.split(a, width, bounds), memory.split(a, width)
        assert [(r, s.tolist()) for r, s in with_b] == [(r, s.tolist()) for r, s in without]
        got = [(r.alloc if r is not None and not r.on_pad else ("pad", r.alloc) if r is not None else None,
                sorted(s.tolist())) for r, s in with_b]
        assert got == [(r, sorted(xs)) for r, xs in _split_reference(allocs, a, width)]

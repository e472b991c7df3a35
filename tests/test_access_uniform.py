"""The PTX observer takes a load whose lanes all read one address (handed over as a zero-stride vector) as one lane's
access with every lane's bytes: the same accesses (bounds, bytes, runs, sectors, region) and words as the lanes'
addresses one by one give, for data, signal-pad words and memory that is not symmetric, every width."""
import random

import numpy as np
import pytest

from pkbsim.device.memory_map import MemoryMap
from pkbsim.device.ptx_memory import KernelObserver

from test_access_bounds import _Pad, _Symm  # the same stand-ins for a symmetric allocation's pad and table


class _Alloc:
    def __init__(self, rank: int, base: int, nbytes: int):
        self.rank, self.base, self.nbytes = rank, base, nbytes
        self.pad = _Pad(base + nbytes + 4096)

    def unmapped_for(self, rank):
        return None


class _World:
    size = 2


class _Ctx:
    rank, world, call = 0, _World(), 1


class _State:
    def __init__(self, memory):
        self.memory = memory


def _observer(allocs) -> KernelObserver:
    obs = KernelObserver.__new__(KernelObserver)
    obs.ctx, obs.run, obs.state = _Ctx(), None, _State(MemoryMap(_Symm(allocs)))
    return obs


def _fields(accs):
    return [(a.lo, a.hi, a.nbytes, a.sectors, a.runs, a.region, a.rank, a.world_size, a.call) for a in accs]


@pytest.mark.parametrize("seed", range(10))
def test_one_address_for_every_lane_is_every_lane_s_access(seed):
    rng = random.Random(seed)
    allocs = [_Alloc(0, 1 << 20, 1 << 14), _Alloc(1, (1 << 20) + (1 << 15), 1 << 14)]
    obs = _observer(allocs)
    for _ in range(60):
        width = rng.choice((1, 2, 4, 8, 16))
        where = rng.choice(((1 << 20) + rng.randrange(0, 1 << 14), (1 << 20) + (1 << 15) + rng.randrange(0, 1 << 14),
                            allocs[0].pad.ptr + rng.randrange(0, 256), 1 << 30, (1 << 20) + (1 << 14) - width + 1))
        where -= where % width if rng.random() < 0.8 else 0
        n = rng.choice((2, 3, 32, 4096))
        lanes = np.full(n, where, dtype=np.uint64)
        one = lanes[:1].copy()
        assert _fields(obs._accesses(one, width, n)) == _fields(obs._accesses(lanes, width))
        assert _fields(obs._words(one, width, n)) == _fields(obs._words(lanes, width))
        assert _fields(obs._data_or_pad_words(one, width, n)) == _fields(obs._data_or_pad_words(lanes, width))

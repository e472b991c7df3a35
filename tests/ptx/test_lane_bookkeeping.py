"""The interpreter's cheap forms of its per-step bookkeeping give what the plain numpy forms give (simt.warps,
memory._items): they run at every divergent step and every load or store of up to 65536 lanes."""
from __future__ import annotations

import numpy as np
import pytest

from pkbsim.ptx.errors import MemoryFault
from pkbsim.ptx.memory import Region, gather, scatter
from pkbsim.ptx.simt import warps


@pytest.mark.parametrize("seed", range(5))
def test_warps_counts_warps_with_a_lane_set(seed):
    rng = np.random.default_rng(seed)
    lanes = rng.random(32 * 97) < rng.choice([0.001, 0.02, 0.5])
    lanes[32 * 3 + 31] = True        # a warp whose last lane alone is set
    lanes[32 * 5:32 * 6] = False     # and an empty one
    assert warps(lanes) == int(np.count_nonzero(lanes.reshape(-1, 32).any(axis=1)))
    assert warps(lanes[::-1]) == int(np.count_nonzero(lanes[::-1].reshape(-1, 32).any(axis=1)))  # not contiguous


def test_gather_scatter_index_items_and_keep_faults():
    mem = Region(0x1000, np.arange(64, dtype=np.uint8), "buf")
    off = np.array([0, 4, 60], np.uint64)
    assert gather(mem, off, np.uint32).tolist() == np.arange(64, dtype=np.uint8).view(np.uint32)[[0, 1, 15]].tolist()
    scatter(mem, np.array([2], np.uint64), np.uint16, np.array([0xBEEF], np.uint16))
    assert gather(mem, np.array([2], np.uint64), np.uint16).tolist() == [0xBEEF]
    with pytest.raises(MemoryFault, match="misaligned"):
        gather(mem, np.array([2], np.uint64), np.uint32)
    with pytest.raises(IndexError):   # an offset with the top bit set fails as out of range, never wraps round
        gather(mem, np.array([(1 << 64) - 4], np.uint64), np.uint32)
    with pytest.raises(IndexError):
        gather(mem, np.array([64], np.uint64), np.uint32)

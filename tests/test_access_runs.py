"""The byte ranges and 32-byte sectors an access touches, counted without sorting where the addresses lie close
(the interpreter's hot path), against a brute-force count of the bytes: dense, strided, scattered and
overlapping accesses of every width."""
import numpy as np
import pytest

from pkbsim.device.accesses import byte_runs
from pkbsim.device.kernel_report import SECTOR, sector_bytes


def brute_runs(starts, width: int) -> list[tuple[int, int]]:
    touched = sorted({int(s) + k for s in starts for k in range(width)})
    runs, lo = [], touched[0]
    for prev, cur in zip(touched, touched[1:] + [None]):
        if cur is None or cur != prev + 1:
            runs.append((lo, prev + 1))
            lo = cur
    return runs


def brute_sectors(starts, width: int) -> int:
    return len({(int(s) + k) // SECTOR for s in starts for k in (0, width - 1)}) * SECTOR


@pytest.mark.parametrize("layout", ["dense", "strided", "scattered", "far apart"])
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_runs_and_sectors_match_a_byte_count(layout, width):
    rng = np.random.default_rng(width * 7 + len(layout))
    base = 1 << 40
    for n in (1, 5, 32, 257):
        offsets = {"dense": np.arange(n) * width, "strided": np.arange(n) * 3 * width,
                   "scattered": rng.integers(0, 4 * n * width, n), "far apart": rng.integers(0, 1 << 30, n)}[layout]
        starts = rng.permutation(base + offsets).astype(np.uint64)
        assert byte_runs(starts, width) == brute_runs(starts, width)
        assert sector_bytes(starts, width) == brute_sectors(starts, width)

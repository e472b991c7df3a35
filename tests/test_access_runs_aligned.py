"""byte_runs and sector_bytes count an aligned access per item (the PTX observer's case: every address a multiple of
the width) and give what they give counting bytes, on random warp-like, strided, broadcast and scattered addresses."""
import numpy as np
import pytest

from pkbsim.device.accesses import byte_runs
from pkbsim.device.kernel_report import sector_bytes


@pytest.mark.parametrize("seed", range(4))
def test_aligned_counts_match_byte_counts(seed):
    rng = np.random.default_rng(seed)
    for trial in range(400):
        w = int(rng.choice([1, 2, 4, 8, 16]))
        n = int(rng.integers(1, 300))
        base = int(rng.integers(0, 1 << 40)) * 64
        a = [base + w * rng.integers(0, 3 * n, n), base + w * np.arange(n) * int(rng.integers(1, 4)),
             np.full(n, base + w * int(rng.integers(0, 100))), base + w * rng.integers(0, 100000, n)][trial % 4]
        a = np.asarray(a).astype(np.uint64)
        assert byte_runs(a, w, aligned=True) == byte_runs(a, w)
        assert sector_bytes(a, w, aligned=True) == sector_bytes(a, w)

"""cub's device-wide segmented radix sort, called from an inline-CUDA extension's host code, sorts on the
simulator as on a GPU (tests/programs/cuda_cub_segmented_sort.py). ParallelKernelBench gemini-CUDA 83 was
rejected as a wrong output that an H200 scored correct at the same size: the stand-in runtime reported
PTX version 0, so cub returned cudaErrorInvalidDeviceFunction without launching; the device pass cut the
host call that instantiates cub's kernel templates, so nvcc never compiled them; and bar.red was not
interpreted. A slow test (one extension build)."""
import io
import os

import pytest
from conftest import HERE

from pkbsim.cuda.toolchain import unavailable
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_cub_segmented_sort_pairs_sorts_each_segment():
    out = io.StringIO()
    res = check_script(os.path.join(HERE, "programs", "cuda_cub_segmented_sort.py"), [],
                       RunOptions(nproc=1, timeout=900, output=out))
    text = out.getvalue()
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert "errors 0 0 temp bytes > 0: True" in text, text
    assert "keys [-1.0, 2.5, 3.0, -4.0, 0.0, 1.0, 5.0, 7.0]" in text, text
    assert "vals [1, 2, 0, 5, 3, 6, 7, 4]" in text, text

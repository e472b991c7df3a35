"""Inline CUDA on simulated ranks (tests/programs/cuda_device_index.py, one build): the candidate's C++ sees
its rank's current device through `get_device()` and `cudaGetDevice`, as on the rank's GPU (each rank heard
device 0 before); without set_device every rank is on device 0, as a GPU process starts. Builds take a
minute: slow tests."""
import io
import os

import pytest
from conftest import HERE

from pkbsim.cuda.toolchain import unavailable
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]
PROGRAM = os.path.join(HERE, "programs", "cuda_device_index.py")


def check(mode: str):
    out = io.StringIO()
    res = check_script(PROGRAM, [mode], RunOptions(nproc=3, timeout=600, output=out))
    return res, out.getvalue()


@pytest.mark.parametrize("mode,devices", [("set", [0, 1, 2]), ("unset", [0, 0, 0])])
def test_the_candidates_cpp_sees_its_ranks_current_device(mode, devices):
    res, out = check(mode)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert sorted(out.split("\n")[:-1]) == [f"[rank {r}] rank {r} device {d}" for r, d in enumerate(devices)], out

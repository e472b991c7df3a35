"""Inline CUDA on simulated ranks (tests/programs/cuda_host_runtime.py, one build): the candidate's C++ sees
its rank's current device through `get_device()` and `cudaGetDevice`, as on the rank's GPU (each rank heard
device 0 before); without set_device every rank is on device 0, as a GPU process starts. A runtime call the
stand-in lacks is pkb's limit, not the program's error (it was reported as the program's RuntimeError).
Builds take a minute: slow tests."""

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


@pytest.mark.parametrize("mode,devices", [("set", [0, 1, 2]), ("unset", [0, 0, 0])])
def test_the_candidates_cpp_sees_its_ranks_current_device(mode, devices):
    res, out = check_program("cuda_host_runtime.py", mode, 3)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert sorted(out.split("\n")[:-1]) == [f"[rank {r}] rank {r} device {d}" for r, d in enumerate(devices)], out


def test_a_runtime_call_the_stand_in_lacks_is_not_simulated():
    res, _ = check_program("cuda_host_runtime.py", "graph", 3)
    assert [f.kind for f in res.findings] == ["not_simulated"], [f.render() for f in res.findings]
    assert "cudaGraphCreate" in res.findings[0].message and "cuda_host_runtime.py" in res.findings[0].sites[0]

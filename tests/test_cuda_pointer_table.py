"""Inline CUDA on simulated ranks (tests/programs/cuda_pointer_table.py, one build): a kernel reading tensors
through a table of their addresses reads the program's live tensors, also those made before the extension
was built (ParallelKernelBench problem 21, Triton tree: a MemoryFault in the screen, correct on an H200);
an address of a deleted tensor is still a fault. Builds take minutes: slow tests."""
import io
import os

import pytest
from conftest import HERE

from pkbsim.cuda.toolchain import unavailable
from pkbsim.world.check import check_script
from pkbsim.world.launcher import RunOptions

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]
PROGRAM = os.path.join(HERE, "programs", "cuda_pointer_table.py")


def check(mode: str):
    out = io.StringIO()
    res = check_script(PROGRAM, [mode], RunOptions(nproc=1, timeout=600, output=out))
    return res, out.getvalue()


def test_tensors_made_before_the_build_are_readable_through_their_addresses():
    res, out = check("live")
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert "sum 3.0" in out


def test_the_address_of_a_deleted_tensor_is_a_fault():
    res, _ = check("freed")
    assert res.verdict == "error"
    assert "MemoryFault" in res.findings[0].message, res.findings[0].message

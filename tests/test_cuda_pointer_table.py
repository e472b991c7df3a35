"""Inline CUDA on simulated ranks (tests/programs/cuda_pointer_table.py, one build): a kernel reading tensors
through a table of their addresses reads the program's live tensors, also those made before the extension
was built (ParallelKernelBench problem 21, Triton tree: a MemoryFault in the screen, correct on an H200);
an address of a deleted tensor is still a fault. Builds take minutes: slow tests."""

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_tensors_made_before_the_build_are_readable_through_their_addresses():
    res, out = check_program("cuda_pointer_table.py", "live", 1)
    assert res.verdict == "ok", [f.render() for f in res.findings]
    assert "sum 3.0" in out


def test_the_address_of_a_deleted_tensor_is_a_fault():
    res, _ = check_program("cuda_pointer_table.py", "freed", 1)
    assert res.verdict == "error"
    assert "MemoryFault" in res.findings[0].message, res.findings[0].message

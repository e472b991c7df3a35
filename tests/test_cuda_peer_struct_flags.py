"""Inline CUDA on simulated ranks (tests/programs/cuda_peer_struct_flags.py, one build): a kernel indexing a
by-value struct of peer pointers in a loop computes the right all-reduce, and a flag whose address adds the
rank as a byte offset before the cast to int* is a misaligned-address fault naming its CUDA line (it was
rounded down to the word and could end as a deadlock). Builds take minutes: slow tests."""

import pytest
from conftest import check_program

from pkbsim.cuda.toolchain import unavailable

pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


def test_a_struct_of_peer_pointers_indexed_by_a_loop_sums_every_peer():
    res, _ = check_program("cuda_peer_struct_flags.py", "aligned")
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_a_flag_at_a_byte_offset_is_a_misaligned_address_fault_with_its_line():
    res, _ = check_program("cuda_peer_struct_flags.py", "byte_offset")
    assert res.verdict == "error"
    msg = res.findings[0].message
    assert "MemoryFault" in msg and "misaligned address" in msg
    assert "cuda_peer_struct_flags.py:" in msg

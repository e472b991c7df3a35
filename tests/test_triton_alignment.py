"""A Triton kernel whose flag address adds the rank as a byte offset before the cast to an int32 pointer
faults with a misaligned address naming the kernel line, as on the GPU (the CPU interpreter read across
the word); its twin scales the offset by the flag's size."""
import pytest

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

PROGRAM = """
import torch.distributed._symmetric_memory as symm_mem
import triton, triton.language as tl

@triton.jit
def bump(pad, byte_offset):
    flag = (pad + byte_offset).to(tl.pointer_type(tl.int32))
    tl.atomic_add(flag, 1, sem="release", scope="sys")

buf = symm_mem.empty(16, dtype=torch.float32, device="cuda")
hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
bump[(1,)](hdl.signal_pad_ptrs[rank], 64 + rank * STRIDE)
dist.barrier()
dist.destroy_process_group()
"""


def test_a_flag_at_a_byte_offset_is_a_misaligned_address(run_program):
    res = run_program("STRIDE = 1\n" + PROGRAM)
    assert res.verdict == "error"
    msg = res.findings[0].message
    assert "misaligned address" in msg and "prog.py:" in msg


def test_a_flag_at_a_word_offset_is_fine(run_program):
    res = run_program("STRIDE = 4\n" + PROGRAM)
    assert res.verdict == "ok", [f.render() for f in res.findings]

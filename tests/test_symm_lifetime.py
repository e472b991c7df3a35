"""Symmetric-memory lifetimes (issue 41): an allocation is freed when its tensor (every view of it), its handles
and the tensors from them are all gone, as torch frees it; a device access through a kept raw address of a
freed buffer is the GPU's illegal address, reported with the kernel line, the rank, the address, where the
buffer was allocated and where its last reference went. What keeps it alive in torch keeps it alive here."""
import pathlib

import pytest

from pkbsim.screen.pipeline import ScreenOptions, screen
from pkbsim.screen.result import Verdict
from pkbsim.timing.topology import load_topology
from tasks.registry import get

pytest.importorskip("triton", reason="triton is not installed (pip install 'pkb[triton]')")

HERE = pathlib.Path(__file__).parent
USE_AFTER_FREE = HERE / "broken_candidates" / "all_reduce__symm_use_after_free.py"
KEEPS_HANDLE = HERE / "fixed_candidates" / "all_reduce__symm_keeps_handle.py"


def run_screen(path):
    return screen(get("all_reduce"), str(path), ScreenOptions(2, load_topology("hgx-h100"), seed=5, cost=False))


def test_a_store_through_cached_addresses_of_a_dropped_buffer_is_rejected_and_its_twin_passes():
    bug = run_screen(USE_AFTER_FREE)
    assert (bug.verdict, bug.stage) == (Verdict.REJECT, "functional"), bug.reasons
    msg = bug.reasons[0].message
    assert "illegal memory access (use after free)" in msg and "MemoryFault" in msg, msg
    assert "allocated at all_reduce__symm_use_after_free.py:47" in msg, msg    # symm_mem.empty
    assert "last reference went at all_reduce__symm_use_after_free.py:54" in msg, msg  # the call that dropped it
    assert "all_reduce__symm_use_after_free.py:34" in msg, msg                  # the kernel's store
    assert "address 0x" in msg and "rank " in msg
    fixed = run_screen(KEEPS_HANDLE)
    assert fixed.verdict == Verdict.PASS and fixed.correct, fixed.reasons


# A Triton kernel that stores through the right neighbour's raw buffer address; HOLD says what the program
# keeps of the allocation before the kernel runs (the tensor and the handle are locals of `address`).
PROGRAM = """
import gc
import torch.distributed._symmetric_memory as symm_mem
import triton, triton.language as tl

@triton.jit
def fill_at(addr, value, N: tl.constexpr):
    dst = addr.to(tl.pointer_type(tl.float32))
    tl.store(dst + tl.arange(0, N), tl.full((N,), value, tl.float32))

KEPT = []

def address():
    buf = symm_mem.empty(16, dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    KEPT.extend(HOLD(buf, hdl))
    return hdl.buffer_ptrs[(rank + 1) % world]

addr = address()
gc.collect()
dist.barrier()
fill_at[(1,)](addr, float(rank), N=16)
dist.barrier()
dist.destroy_process_group()
"""


@pytest.mark.parametrize("hold", [
    "lambda buf, hdl: [buf]",                                 # the tensor: torch caches its handle in it
    "lambda buf, hdl: [buf[4:8]]",                            # a view of the tensor
    "lambda buf, hdl: [hdl]",                                 # the handle maps every member's buffer
    "lambda buf, hdl: [hdl.get_buffer(rank, (4,), torch.float32)]",  # a tensor from the handle keeps it
    "lambda buf, hdl: [hdl.get_signal_pad(rank)]",            # so does a signal-pad tensor
])
def test_what_keeps_the_buffer_alive_in_torch_keeps_it_alive(run_program, hold):
    res = run_program(f"HOLD = {hold}\n" + PROGRAM)
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_dropping_the_tensor_and_the_handle_frees_the_buffer(run_program):
    res = run_program("HOLD = lambda buf, hdl: []\n" + PROGRAM)
    assert res.verdict == "error", [f.render() for f in res.findings]
    msg = res.findings[0].message
    assert "use after free" in msg and "unmapped on rank" in msg and "prog.py:" in msg, msg


def test_a_kept_tensor_rendezvoused_again_gets_its_cached_handle_on_every_rank(run_program):
    """torch caches the handle with the allocation: a rank that dropped its handle and one that kept it both
    get the cached one (no second exchange, which only one rank would join)."""
    res = run_program("""
        import torch.distributed._symmetric_memory as symm_mem
        buf = symm_mem.empty(16, dtype=torch.float32, device="cuda")
        hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
        first = id(hdl)
        if rank == 0:
            del hdl
        again = symm_mem.rendezvous(buf, dist.group.WORLD)
        assert id(again) == first
        dist.barrier()
        dist.destroy_process_group()
    """)
    assert res.verdict == "ok", [f.render() for f in res.findings]


def test_freed_buffers_are_given_back_and_new_ones_mapped(run_program):
    """A buffer allocated, used and dropped on every call is no fault; the memory map follows the new ones."""
    res = run_program("""
        import torch.distributed._symmetric_memory as symm_mem
        import triton, triton.language as tl
        from pkbsim.symm.allocations import state
        from pkbsim.world.context import require

        @triton.jit
        def fill_at(addr, value, N: tl.constexpr):
            tl.store(addr.to(tl.pointer_type(tl.float32)) + tl.arange(0, N), tl.full((N,), value, tl.float32))

        for it in range(4):
            buf = symm_mem.empty(16, dtype=torch.float32, device="cuda")
            hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
            hdl.barrier()
            fill_at[(1,)](hdl.buffer_ptrs[(rank + 1) % world], float(it), N=16)
            hdl.barrier()
            assert float(buf[0]) == it
            del buf, hdl
        dist.barrier()
        st = state(require().world)
        st.reap()
        assert all(a.released is not None for a in st.by_storage.values())
        dist.destroy_process_group()
    """)
    assert res.verdict == "ok", [f.render() for f in res.findings]


@pytest.mark.slow
def test_inline_cuda_store_through_a_dropped_buffers_address_is_a_fault_and_its_twin_runs():
    from conftest import check_program

    from pkbsim.cuda.toolchain import unavailable
    if unavailable() is not None:
        pytest.skip(str(unavailable()))
    res, _ = check_program("cuda_symm_lifetime.py", "freed", 2)
    assert res.verdict == "error"
    msg = res.findings[0].message
    assert "use after free" in msg and "cuda_symm_lifetime.py:21" in msg, msg   # the kernel's store
    assert "allocated at cuda_symm_lifetime.py:34" in msg and "went at cuda_symm_lifetime.py:47" in msg, msg
    res, out = check_program("cuda_symm_lifetime.py", "kept", 2)
    assert res.verdict == "ok" and "stored" in out, [f.render() for f in res.findings]

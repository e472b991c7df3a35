"""Unsupported instructions, faults and hangs are reported with the source line, never guessed."""
import numpy as np
import pytest
import torch

from pkbsim.ptx import KernelHang, MemoryFault, NotSimulated, PtxError, load_ptx

from .conftest import corpus_module


def test_unsupported_instruction_names_the_source_line(cooperative):
    with pytest.raises(NotSimulated) as err:
        cooperative.launch("unsupported_wgmma", 1, 32, (torch.zeros(32),))
    assert str(err.value) == "not simulated: wgmma.fence.sync.aligned at cooperative.cu:244"


def test_out_of_bounds_access_is_a_memory_fault(elementwise):
    x, y = torch.zeros(8), torch.zeros(8)
    with pytest.raises(MemoryFault, match=r"outside every mapped buffer.* at elementwise.cu:\d+"):
        elementwise.launch("vec_add", 1, 64, (x, x, y, 1 << 20))


def test_bad_arguments_get_one_line(elementwise):
    with pytest.raises(PtxError, match="takes 4 arguments, got 2"):
        elementwise.launch("vec_add", 1, 32, (torch.zeros(4), torch.zeros(4)))
    with pytest.raises(PtxError, match="no kernel named 'nope'.*vec_add"):
        elementwise.launch("nope", 1, 32, ())


def test_multimem_reduces_over_every_member(cooperative):
    """A multicast address fans out to each member buffer (the multi-rank world maps peers this way)."""
    from pkbsim.ptx import MulticastRegion, Region

    rng = np.random.default_rng(3)
    peers = [torch.from_numpy(rng.standard_normal(256).astype(np.float32)).to(torch.bfloat16) for _ in range(3)]
    expected = sum(p.float() for p in peers).to(torch.bfloat16)
    space = cooperative.memory.__class__()
    base = 1 << 50
    space.add(MulticastRegion(base, 512, [Region.of_tensor(p) for p in peers]))
    cooperative.launch("multimem_allreduce_bf16x2", 1, 128, (base, 128), memory=space)
    for p in peers:
        assert torch.equal(p, expected)


def test_multimem_at_an_address_no_buffer_holds_is_a_fault(cooperative):
    """multicast_ptr is 0 where the machine has no multicast; a kernel that uses it unchecked faults on a
    GPU (PKB gemini-CUDA 13 on an H200 with multicast off): a MemoryFault with the line, not 'not simulated'.
    The twin above reduces over a real multicast range."""
    space = cooperative.memory.__class__()
    with pytest.raises(MemoryFault, match=r"multimem access to address 0x0, which is no multicast buffer"):
        cooperative.launch("multimem_allreduce_bf16x2", 1, 128, (0, 128), memory=space)


BARRIER_DEADLOCK = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry stuck(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    bar.sync 0;
DONE:
    bar.sync 0;
    ret;
}
"""

SCOPED_ASM = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry scoped(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {
    .reg .b32 t;
    add.u32 t, %r1, 100;
    mov.u32 %r2, t;
    }
    {
    .reg .b16 t;
    mov.b16 t, 7;
    cvt.u32.u16 %r1, t;
    }
    add.u32 %r2, %r2, %r1;
    mul.wide.u32 %rd2, %r2, 0;
    st.global.u32 [%rd1], %r2;
    ret;
}
"""


DIVERGENT_BARRIERS = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry divergent(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    bar.sync 0;
DONE:
    bar.sync 0;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    add.u32 %r2, %r1, 1;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""


def test_divergent_barriers_still_open():
    """Lane 0 and the others wait at different bar.sync instructions: both open (as on sm_70+).

    Every thread then writes tid+1: a barrier that never opened would hang (KernelHang), one that let
    some threads out early or never would leave zeros behind.
    """
    mod = load_ptx(DIVERGENT_BARRIERS, "divergent.ptx")
    out = torch.zeros(64, dtype=torch.int32)
    mod.launch("divergent", 1, 64, (out,))
    assert torch.equal(out, torch.arange(1, 65, dtype=torch.int32))


def test_endless_loop_is_stopped():
    mod = load_ptx(BARRIER_DEADLOCK.replace("@%p1 bra DONE;", "@%p1 bra DONE;\nLOOP:\n    bra LOOP;"), "loop.ptx")
    with pytest.raises(KernelHang, match="ran past 1000 warp-instructions"):
        mod.launch("stuck", 1, 64, (torch.zeros(1),), max_warp_instructions=1000)


def test_inline_asm_scopes_may_redeclare_a_register():
    mod = load_ptx(SCOPED_ASM, "scoped.ptx")
    out = torch.zeros(1, dtype=torch.int32)
    mod.launch("scoped", 1, 1, (out,))
    assert out.item() == 107


def test_compile_error_is_one_line():
    from pkbsim.ptx import CompileError, compile_cuda, find_nvcc
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    with pytest.raises(CompileError, match=r"nvcc failed on broken.cu: .*error"):
        compile_cuda("__global__ void k() { undefined_thing(); }", "broken.cu")


def test_corpus_compiles_from_cache_quickly(monkeypatch):
    """A second compile of the same source is a cache hit: the same PTX, and nvcc does not run."""
    import pkbsim.ptx.compile as compile_mod

    first = corpus_module("elementwise.cu")  # compiles, or hits the cache another run left

    def nvcc_must_not_run(args, *a, **kw):
        raise AssertionError(f"nvcc ran on a source already in the cache: {args}")

    monkeypatch.setattr(compile_mod.subprocess, "run", nvcc_must_not_run)
    second = corpus_module("elementwise.cu")
    assert second.ptx == first.ptx
    assert "vec_add" in second.kernel_names and second.kernel_names == first.kernel_names

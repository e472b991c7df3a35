"""`isspacep` (CCCL 13.5 asks `isspacep.local` in its atomics): a generic address made from a shared or local
one answers true for that space alone; a global pointer answers true for global alone. Twin: an address space
the interpreter cannot tell apart (const) is pkb's limit, named, never a guess."""
import pytest
import torch

from pkbsim.errors import NotSimulated
from pkbsim.ptx import load_ptx

ISSPACEP = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry probe(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 s[4];
    .local .align 4 .b32 l[4];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u64 %rd2, s;
    cvta.shared.u64 %rd3, %rd2;
    mov.u64 %rd4, l;
    cvta.local.u64 %rd5, %rd4;
    // each word: bit 0 global, bit 1 shared, bit 2 local
    isspacep.global %p1, %rd3;
    isspacep.shared::cta %p2, %rd3;
    isspacep.local %p3, %rd3;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 2, 0, %p2;
    selp.u32 %r3, 4, 0, %p3;
    or.b32 %r4, %r1, %r2;
    or.b32 %r4, %r4, %r3;
    st.global.u32 [%rd1], %r4;
    isspacep.global %p1, %rd5;
    isspacep.shared %p2, %rd5;
    isspacep.local %p3, %rd5;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 2, 0, %p2;
    selp.u32 %r3, 4, 0, %p3;
    or.b32 %r4, %r1, %r2;
    or.b32 %r4, %r4, %r3;
    st.global.u32 [%rd1+4], %r4;
    isspacep.global %p1, %rd1;
    isspacep.shared %p2, %rd1;
    isspacep.local %p3, %rd1;
    selp.u32 %r1, 1, 0, %p1;
    selp.u32 %r2, 2, 0, %p2;
    selp.u32 %r3, 4, 0, %p3;
    or.b32 %r4, %r1, %r2;
    or.b32 %r4, %r4, %r3;
    st.global.u32 [%rd1+8], %r4;
    ret;
}
"""


def test_each_generic_address_is_in_its_own_space_alone():
    out = torch.full((3,), -1, dtype=torch.int32)
    load_ptx(ISSPACEP, "isspacep.ptx").launch("probe", 1, 1, (out,))
    assert out.tolist() == [2, 4, 1]   # shared, local, global


def test_a_space_the_interpreter_cannot_tell_is_a_named_limit():
    src = ISSPACEP.replace("isspacep.global %p1, %rd3;", "isspacep.const %p1, %rd3;")
    out = torch.zeros(3, dtype=torch.int32)
    with pytest.raises(NotSimulated, match="isspacep"):
        load_ptx(src, "isspacep.ptx").launch("probe", 1, 1, (out,))

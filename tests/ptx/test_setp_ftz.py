"""`setp` with `.ftz` (nvcc emits it under --use_fast_math, as ThunderKittens builds are): f32 subnormal
operands compare as zero; without `.ftz` they do not."""
import numpy as np
import torch

from pkbsim.ptx import load_ptx

SETP = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry cmp(.param .u64 x, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.f32 %f1, [%rd4];
    setp.eq.ftz.f32 %p1, %f1, 0f00000000;
    setp.eq.f32 %p2, %f1, 0f00000000;
    selp.u32 %r2, 1, 0, %p1;
    selp.u32 %r3, 2, 0, %p2;
    or.b32 %r4, %r2, %r3;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r4;
    ret;
}
"""


def test_ftz_compares_subnormals_as_zero():
    tiny = np.finfo(np.float32).tiny
    x = torch.tensor([0.0, -0.0, tiny / 4, -tiny / 2, tiny, 1.0], dtype=torch.float32)
    out = torch.full((6,), -1, dtype=torch.int32)
    load_ptx(SETP, "setp.ptx").launch("cmp", 1, 6, (x, out))
    # bit 0: the .ftz comparison; bit 1: the exact one
    assert out.tolist() == [3, 3, 1, 1, 0, 0]

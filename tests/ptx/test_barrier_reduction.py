"""bar.red (`__syncthreads_count/and/or`, the block-wide votes cub's radix sort uses) waits like bar.sync and
gives every waiting thread the count, and or or of their predicates, per CTA. Two CTAs of 64 threads vote
`tid < k` with k = 10 and 40; each thread stores (count, and, or). Before the interpreter ran it, cub's
segmented sort ended 'not simulated: bar.red.and.pred' (ParallelKernelBench gemini-CUDA 83)."""
import torch

from pkbsim.ptx import load_ptx

VOTE = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry vote(.param .u64 out, .param .u32 k0, .param .u32 k1)
{
    .reg .pred %p<6>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [k0];
    ld.param.u32 %r2, [k1];
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    setp.eq.u32 %p1, %r4, 0;
    selp.u32 %r5, %r1, %r2, %p1;
    setp.lt.u32 %p2, %r3, %r5;
    bar.red.popc.u32 %r6, 0, %p2;
    bar.red.and.pred %p3, 0, %p2;
    bar.red.or.pred %p4, 1, !%p2;
    selp.u32 %r7, 1, 0, %p3;
    selp.u32 %r8, 1, 0, %p4;
    mad.lo.u32 %r9, %r4, 64, %r3;
    mul.wide.u32 %rd2, %r9, 12;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    st.global.u32 [%rd3+4], %r7;
    st.global.u32 [%rd3+8], %r8;
    ret;
}
"""


def test_block_votes_count_and_or_per_cta():
    mod = load_ptx(VOTE, "vote.ptx")
    out = torch.full((128, 3), -1, dtype=torch.int32)
    mod.launch("vote", 2, 64, (out, 10, 64))
    cta0, cta1 = out[:64], out[64:]
    assert (cta0[:, 0] == 10).all() and (cta1[:, 0] == 64).all(), out[:, 0]
    assert (cta0[:, 1] == 0).all() and (cta1[:, 1] == 1).all(), out[:, 1]   # and: all lanes below k
    assert (cta0[:, 2] == 1).all() and (cta1[:, 2] == 0).all(), out[:, 2]   # or of !p: some lane at or above k

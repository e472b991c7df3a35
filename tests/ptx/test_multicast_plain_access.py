"""A plain `st` to a multicast address lands in every member buffer (NVLink multicast replicates it, as
ParallelKittens all-gathers that store a float4 through `mc_ptr` rely on); a plain `ld` from one is left
undefined by PTX and is reported as not simulated, never guessed."""
import numpy as np
import pytest
import torch

from pkbsim.ptx import MulticastRegion, NotSimulated, Region, load_ptx

KERNELS = """
.version 9.0
.target sm_90a
.address_size 64
.visible .entry put(.param .u64 mc)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [mc];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    add.u32 %r2, %r1, 7;
    st.global.u32 [%rd3], %r2;
    ret;
}
.visible .entry get(.param .u64 mc, .param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [mc];
    ld.param.u64 %rd2, [out];
    ld.global.u32 %r1, [%rd1];
    st.global.u32 [%rd2], %r1;
    ret;
}
"""


def _space(mod, members):
    space = mod.memory.__class__()
    base = 1 << 50
    space.add(MulticastRegion(base, 256, [Region.of_tensor(m) for m in members]))
    return space, base


def test_a_plain_store_to_a_multicast_address_reaches_every_member():
    mod = load_ptx(KERNELS, "mc.ptx")
    members = [torch.zeros(64, dtype=torch.int32) for _ in range(3)]
    space, base = _space(mod, members)
    mod.launch("put", 1, 64, (base,), memory=space)
    for m in members:
        assert torch.equal(m, torch.arange(7, 71, dtype=torch.int32))


def test_a_plain_load_from_a_multicast_address_is_not_simulated():
    mod = load_ptx(KERNELS, "mc.ptx")
    members = [torch.zeros(64, dtype=torch.int32) for _ in range(2)]
    space, base = _space(mod, members)
    out = torch.zeros(1, dtype=torch.int32)
    space.add(Region.of_tensor(out))
    with pytest.raises(NotSimulated, match="plain load from a multicast address"):
        mod.launch("get", 1, 1, (base, out.data_ptr()), memory=space)
    assert np.all(out.numpy() == 0)

"""Misaligned accesses fault as on the GPU (never rounded down), and a struct parameter indexed at run
time (nvcc: `mov` of the parameter's name, then `ld.param` at a computed address) is read correctly."""
import struct

import pytest
import torch

from pkbsim.ptx import MemoryFault, compile_cuda, find_nvcc
from pkbsim.ptx.memory import AddressSpace, Region

SRC = r"""
extern "C" __global__ void bump_flag(char* base, int offset, int* out) {
    int* flag = (int*)(base + offset);
    atomicAdd(flag, 1);
    out[threadIdx.x] = 1;
}
extern "C" __global__ void read_flag(char* base, int offset, int* out) {
    out[threadIdx.x] = *(volatile int*)(base + offset);
}
extern "C" __global__ void read_float4(char* base, int offset, float* out) {
    float4 v = *(const float4*)(base + offset);
    out[threadIdx.x] = v.x + v.w;
}
struct Peers { const float* p[32]; };   // large: nvcc reads it in place, not from a local copy
extern "C" __global__ void pick_peer(Peers peers, float* out) {
    out[blockIdx.y * blockDim.x + threadIdx.x] = peers.p[blockIdx.y][threadIdx.x];
}
extern "C" __global__ void sum_peers(Peers peers, int n, float* out) {
    const Peers* q = &peers;
    float acc = 0.f;
    for (int i = 0; i < n; ++i) acc += q->p[(i * 3 + threadIdx.x) % n][threadIdx.x];
    out[threadIdx.x] = acc;
}
__device__ __noinline__ float peer_value(const Peers* q, int i, int t) { return q->p[i][t]; }
extern "C" __global__ void sum_peers_in_a_function(Peers peers, int n, float* out) {
    float acc = 0.f;
    for (int i = 0; i < n; ++i) acc += peer_value(&peers, i, threadIdx.x);
    out[threadIdx.x] = acc;
}
"""


@pytest.fixture(scope="module")
def mod():
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    return compile_cuda(SRC, "align_params.cu")


@pytest.mark.parametrize("kernel", ["bump_flag", "read_flag"])
def test_a_misaligned_flag_faults_with_its_line(mod, kernel):
    base, out = torch.zeros(64, dtype=torch.uint8), torch.zeros(32, dtype=torch.int32)
    mod.launch(kernel, 1, 32, (base, 8, out))   # aligned: fine
    with pytest.raises(MemoryFault, match=r"misaligned address: a 4-byte access .* at align_params.cu:(4|8)"):
        mod.launch(kernel, 1, 32, (base, 10, out))


def test_a_vector_access_must_be_aligned_to_its_whole_width(mod):
    base, out = torch.zeros(64, dtype=torch.uint8), torch.zeros(32)
    mod.launch("read_float4", 1, 32, (base, 16, out))
    with pytest.raises(MemoryFault, match="a 16-byte access .* not 16-byte aligned"):
        mod.launch("read_float4", 1, 32, (base, 8, out))


def _peers(n: int):
    tensors = [torch.full((32,), float(i + 1)) for i in range(n)]
    space = AddressSpace()
    for t in tensors:
        space.add(Region.of_tensor(t))
    ptrs = [t.data_ptr() for t in tensors] + [0] * (32 - n)
    return struct.pack("<32Q", *ptrs), space


def test_a_struct_of_pointers_indexed_by_the_block_index(mod):
    params, space = _peers(4)
    out = torch.zeros(4 * 32)
    mod.launch("pick_peer", (1, 4), 32, (params, out), memory=space)
    assert torch.equal(out, torch.arange(1, 5, dtype=torch.float32).repeat_interleave(32))


@pytest.mark.parametrize("kernel", ["sum_peers", "sum_peers_in_a_function"])
def test_a_struct_of_pointers_indexed_by_a_loop(mod, kernel):
    params, space = _peers(4)
    out = torch.zeros(32)
    mod.launch(kernel, 1, 32, (params, 4, out), memory=space)
    assert torch.equal(out, torch.full((32,), 10.0))


FUNC_PARAM_ADDRESS = """
.version 9.0
.target sm_90a
.address_size 64
.func (.param .b32 ret) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    mov.u64 %rd1, x;
    ld.param.u32 %r1, [%rd1];
    add.u32 %r2, %r1, %r1;
    st.param.b32 [ret], %r2;
    ret;
}
.visible .entry call_twice(.param .u32 v, .param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [v];
    {
    .param .b32 a;
    .param .b32 r;
    st.param.b32 [a], %r1;
    call (r), twice, (a);
    ld.param.b32 %r2, [r];
    }
    st.global.u32 [%rd1], %r2;
    ret;
}
"""


def test_a_device_functions_parameter_read_at_its_address_stays_its_own():
    from pkbsim.ptx import load_ptx

    out = torch.zeros(1, dtype=torch.int32)
    load_ptx(FUNC_PARAM_ADDRESS, "func.ptx").launch("call_twice", 1, 1, (21, out))
    assert int(out) == 42


def test_warp_size_is_ptxs_built_in_constant():
    """nvcc emits `warpSize` as PTX's WARP_SZ constant (was NotSimulated: operand 'WARP_SZ')."""
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    m = compile_cuda('extern "C" __global__ void lanes(int* out) { out[threadIdx.x] = warpSize * 2 + threadIdx.x % warpSize; }\n',
                     "warp_size.cu")
    assert "WARP_SZ" in m.ptx
    out = torch.zeros(64, dtype=torch.int32)
    m.launch("lanes", 1, 64, (out,))
    assert out.tolist() == [64 + t % 32 for t in range(64)]

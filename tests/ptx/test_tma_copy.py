"""TMA tile copies and mbarriers in the PTX interpreter (pkbsim/ptx/ops_async.py, pkbsim/ptx/tma.py): a
kernel loads a 2D tile with cp.async.bulk.tensor into shared memory, waits on an mbarrier, changes each
element by its position in the tile (so a wrong swizzle shows), and stores the tile back with a bulk-group
TMA store; boxes at the tensor's edge and at negative coordinates read zeros outside the tensor and write
nothing there. The buggy twins are caught: reading the tile before waiting on the mbarrier, overwriting
the store's source before cp.async.bulk.wait_group.read, and an mbarrier expecting the wrong byte count
(a hang)."""
import numpy as np
import pytest
import torch

from pkbsim.ptx import KernelHang, compile_cuda, find_nvcc
from pkbsim.ptx import tma
from pkbsim.ptx.memory import AddressSpace, Region

SRC = r"""
#include <cuda.h>
#include <cuda_bf16.h>
#include <cstdint>

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void wait_phase(uint64_t* bar, int phase) {
    asm volatile("{\n.reg .pred P1;\nLAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra.uni DONE;\nbra.uni LAB_WAIT;\nDONE:\n}\n" :: "r"(smem(bar)), "r"(phase));
}
__device__ __forceinline__ void load_tile(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem(bar)), "r"(bytes));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(smem(dst)), "l"(map), "r"(x), "r"(y), "r"(smem(bar)) : "memory");
}
__device__ __forceinline__ void store_tile(const CUtensorMap* map, int x, int y, const void* src) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(map), "r"(x), "r"(y), "r"(smem(src)) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
}

// index into the shared tile of logical element (r, c), under a SW-byte swizzle of the shared address
template <typename T, int COLS, int SW> __device__ int at(int r, int c) {
    int byte = (r * COLS + c) * (int)sizeof(T);
    if (SW) byte ^= ((byte >> 7) & (SW / 16 - 1)) << 4;
    return byte / (int)sizeof(T);
}
// 2v plus a small number of the element's place in the tile, so that any misplaced element shows
__device__ float change(float v, int r, int c) { return v * 2.0f + (float)((r * 7 + c) % 61); }
__device__ __nv_bfloat16 change(__nv_bfloat16 v, int r, int c) {
    return __float2bfloat16(__bfloat162float(v) * 2.0f + (float)((r * 7 + c) % 61));
}

enum { GOOD = 0, NO_WAIT = 1, REUSE_SOURCE = 2, SHORT_EXPECT = 3, TWO_PHASES = 4 };

template <typename T, int ROWS, int COLS, int SW, int MODE>
__device__ void body(const CUtensorMap* in, const CUtensorMap* out, int x0, int y0) {
    __shared__ alignas(1024) T tile[ROWS * COLS];
    __shared__ alignas(8) uint64_t bar;
    const int x = x0 + blockIdx.x * COLS, y = y0 + blockIdx.y * ROWS;
    const int bytes = ROWS * COLS * sizeof(T) - (MODE == SHORT_EXPECT ? 16 : 0);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(1));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        load_tile(tile, in, x, y, &bar, bytes);
    }
    __syncthreads();
    if (MODE != NO_WAIT) wait_phase(&bar, 0);
    if (MODE == TWO_PHASES) {          // load the same box again: the mbarrier's second phase (parity 1)
        __syncthreads();
        if (threadIdx.x == 0) load_tile(tile, in, x, y, &bar, bytes);
        wait_phase(&bar, 1);
    }
    for (int i = threadIdx.x; i < ROWS * COLS; i += blockDim.x) {
        T* p = &tile[at<T, COLS, SW>(i / COLS, i % COLS)];
        *p = change(*p, i / COLS, i % COLS);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        store_tile(out, x, y, tile);
        if (MODE != REUSE_SOURCE) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        for (int i = 0; i < ROWS * COLS; ++i) tile[i] = T();   // the buffer is reused
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

// non-tensor bulk copies: n bytes into shared memory and back out, doubled (floats)
extern "C" __global__ void bulk_bytes(const float* in, float* out, int n) {
    __shared__ alignas(128) float buf[1024];
    __shared__ alignas(8) uint64_t bar;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(1));
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem(&bar)), "r"(n * 4));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(smem(buf)), "l"(in), "r"(n * 4), "r"(smem(&bar)) : "memory");
    }
    __syncthreads();
    wait_phase(&bar, 0);
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] *= 2.0f;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(out), "r"(smem(buf)), "r"(n * 4) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

// every thread arrives (the barrier expects blockDim.x arrivals) and polls with test_wait on the state its
// arrive returned (skip: a thread that does not arrive, -1 for none)
extern "C" __global__ void arrive_all(int* out, int skip) {
    __shared__ alignas(8) uint64_t bar;
    __shared__ int seen[256];
    if (threadIdx.x == 0)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(&bar)), "r"((int)blockDim.x));
    seen[threadIdx.x] = threadIdx.x + 1;
    __syncthreads();
    if ((int)threadIdx.x != skip) {
        uint64_t state;
        asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(smem(&bar)) : "memory");
        uint32_t done = 0;
        while (!done)
            asm volatile("{\n.reg .pred P;\nmbarrier.test_wait.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                         : "=r"(done) : "r"(smem(&bar)), "l"(state) : "memory");
    }
    int acc = 0;
    for (int i = 0; i < (int)blockDim.x; ++i) acc += seen[i];
    out[threadIdx.x] = acc;
}

#define KERNEL(name, T, R, C, SW, MODE) \
    extern "C" __global__ void name(const __grid_constant__ CUtensorMap in, const __grid_constant__ CUtensorMap out, \
                                    int x0, int y0) { body<T, R, C, SW, MODE>(&in, &out, x0, y0); }
extern "C" __global__ void f32_sw128_maps_in_global(const CUtensorMap* in, const CUtensorMap* out, int x0, int y0) {
    body<float, 32, 32, 128, GOOD>(in, out, x0, y0);
}
KERNEL(f32_sw128, float, 32, 32, 128, GOOD)
KERNEL(f32_sw64, float, 16, 16, 64, GOOD)
KERNEL(f32_sw32, float, 8, 8, 32, GOOD)
KERNEL(f32_plain, float, 16, 24, 0, GOOD)
KERNEL(bf16_sw128, __nv_bfloat16, 64, 64, 128, GOOD)
KERNEL(f32_two_phases, float, 32, 32, 128, TWO_PHASES)
KERNEL(f32_no_wait, float, 32, 32, 128, NO_WAIT)
KERNEL(f32_reuse_source, float, 32, 32, 128, REUSE_SOURCE)
KERNEL(f32_short_expect, float, 32, 32, 128, SHORT_EXPECT)
"""

SHAPES = {  # kernel -> (torch dtype, tensor-map data type, rows, cols, swizzle mode)
    "f32_sw128": (torch.float32, 7, 32, 32, 3), "f32_sw64": (torch.float32, 7, 16, 16, 2),
    "f32_sw32": (torch.float32, 7, 8, 8, 1), "f32_plain": (torch.float32, 7, 16, 24, 0),
    "bf16_sw128": (torch.bfloat16, 9, 64, 64, 3), "f32_two_phases": (torch.float32, 7, 32, 32, 3),
    "f32_no_wait": (torch.float32, 7, 32, 32, 3), "f32_reuse_source": (torch.float32, 7, 32, 32, 3),
    "f32_short_expect": (torch.float32, 7, 32, 32, 3), "f32_sw128_maps_in_global": (torch.float32, 7, 32, 32, 3),
}
H, W = 70, 88   # not a multiple of any tile: the last boxes hang over the edge


@pytest.fixture(scope="module")
def mod():
    if find_nvcc() is None:
        pytest.skip("nvcc not found")
    return compile_cuda(SRC, "tma_copy.cu")


def run(mod, kernel, x0=0, y0=0):
    dtype, code, rows, cols, swz = SHAPES[kernel]
    torch.manual_seed(0)
    src = torch.randn(H, W).to(dtype)
    dst = torch.full((H, W), -7.0, dtype=dtype)
    space = AddressSpace()
    for t in (src, dst):
        space.add(Region.of_tensor(t))

    def tmap(t):
        return tma.encode(code, 2, t.data_ptr(), [W, H], [W * t.element_size()], [cols, rows], [1, 1], swizzle=swz)
    grid = (-(-(W - x0) // cols), -(-(H - y0) // rows))
    maps = [tmap(src), tmap(dst)]
    if kernel.endswith("maps_in_global"):   # the maps in global memory, passed by pointer
        maps = [torch.frombuffer(bytearray(m), dtype=torch.uint8) for m in maps]
    mod.launch(kernel, grid, 128, [*maps, x0, y0], memory=space)
    # expected: every element a box covers is 2*v + (7*row + column in the box) % 61; elements no box covers keep -7
    expect = dst.clone().fill_(-7.0).float()
    col, row = (torch.arange(W) - x0) % cols, (torch.arange(H) - y0) % rows
    covered_r = slice(max(y0, 0), H)
    covered_c = slice(max(x0, 0), W)
    full = (src.float() * 2 + ((row[:, None] * 7 + col[None, :]) % 61).float()).to(dtype).float()
    expect[covered_r, covered_c] = full[covered_r, covered_c]
    return dst.float(), expect


@pytest.mark.parametrize("kernel", ["f32_sw128", "f32_sw64", "f32_sw32", "f32_plain", "bf16_sw128", "f32_two_phases",
                                    "f32_sw128_maps_in_global"])
def test_tma_load_transform_store_matches(mod, kernel):
    got, expect = run(mod, kernel)
    assert torch.equal(got, expect)


@pytest.mark.parametrize("kernel", ["f32_sw128", "f32_plain"])
def test_boxes_at_negative_coordinates_read_zeros_and_write_only_inside(mod, kernel):
    got, expect = run(mod, kernel, x0=-8, y0=-5)
    assert torch.equal(got, expect)


def test_reading_the_tile_before_waiting_on_the_mbarrier_is_caught(mod):
    got, expect = run(mod, "f32_no_wait")
    assert not torch.equal(got, expect)
    # the copy had not landed: the kernel saw zeros, so it wrote only the numbers of the places
    place = ((torch.arange(32)[:, None] * 7 + torch.arange(32)[None, :]) % 61).float()
    assert torch.equal(got[:32, :32], place)


def test_reusing_the_source_before_wait_group_read_is_caught(mod):
    got, _ = run(mod, "f32_reuse_source")
    assert torch.equal(got, torch.zeros_like(got))   # the store read the buffer after it was cleared


def test_an_mbarrier_expecting_the_wrong_bytes_hangs(mod):
    with pytest.raises(KernelHang, match=r"mbarrier wait never completes.*tma_copy.cu:\d+"):
        run(mod, "f32_short_expect")


def test_the_tensor_map_reaches_the_kernel_as_a_grid_constant_parameter(mod):
    k = mod.kernel("f32_sw128")
    sizes = [(p.size, p.align) for p, _ in k.param_layout]
    assert sizes[:2] == [(128, 128), (128, 128)] or sizes[:2] == [(128, 64), (128, 64)]
    assert np.all([off % 64 == 0 for _, off in k.param_layout[:2]])


def test_labels_of_inlined_asm_blocks_are_renamed_apart(mod):
    # two copies of the `{ LAB_WAIT: ... bra.uni LAB_WAIT; DONE: }` block in one kernel: each branch stays in its block
    fn = mod.program.functions["f32_two_phases"]
    waits = sorted(name for name in fn.labels if name.startswith("LAB_WAIT"))
    assert len(waits) == 2 and len({fn.labels[w] for w in waits}) == 2
    for w in waits:
        back = [i for i, ins in enumerate(fn.code) if ins.parts[0] == "bra" and ins.operands[0].strip() == w]
        assert back and all(fn.labels[w] < i <= fn.labels[w] + 3 for i in back)


UNSUPPORTED = {
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
    "[%r1], [%rd1, {%r2, %r3}], [%r4], %rs1": "multicast::cluster",
    "cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
    "[%r1], [%rd1, {%r2, %r3, %r4}], [%r4], {%rs1}": "im2col",
    "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%rd1, {%r2, %r3}], [%r1]": "cp.reduce",
}


@pytest.mark.parametrize("line", list(UNSUPPORTED))
def test_unsupported_variants_are_pkbs_named_limit(line):
    from pkbsim.ptx import NotSimulated, load_ptx
    ptx = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
           ".reg .b16 %rs<2>;\n.reg .b32 %r<5>;\n.reg .b64 %rd<2>;\n" + line + ";\nret;\n}\n")
    with pytest.raises(NotSimulated, match=UNSUPPORTED[line].replace(".", r"\.")):
        load_ptx(ptx, "k.ptx").kernel("k")


def test_non_tensor_bulk_copies_in_and_out(mod):
    src = torch.randn(1000)
    out = torch.zeros(1000)
    mod.launch("bulk_bytes", 1, 128, [src, out, 1000])
    assert torch.equal(out, src * 2)


def test_every_thread_arrives_and_polls_with_test_wait(mod):
    out = torch.zeros(96, dtype=torch.int32)
    mod.launch("arrive_all", 1, 96, [out, -1])
    assert (out == 96 * 97 // 2).all()

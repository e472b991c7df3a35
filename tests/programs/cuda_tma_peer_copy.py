"""TMA on simulated ranks: the host encodes a tensor map of a peer's symmetric buffer with
cuTensorMapEncodeTiled (pkb's driver stand-in), passes it to a kernel as a `const __grid_constant__
CUtensorMap`, and the kernel copies each 32x32 float tile of the peer's buffer into shared memory
(cp.async.bulk.tensor, 128B swizzle, an mbarrier), doubles it and stores it into this rank's output with a
TMA store (the last row of tiles hangs over the tensor's edge). Mode "ok" fills the buffers, then
dist.barrier(), then copies; mode "no_barrier" skips the barrier: the TMA read of the peer's buffer races
with the peer's fill, which the race check sees only if bulk copies go through the protocol observer.
Usage: cuda_tma_peer_copy.py MODE."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CPP_SRC = "torch::Tensor tile_double(int64_t src, torch::Tensor out);"

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda.h>
#include <cstdint>

constexpr int T = 32;   // 32x32 floats: 128-byte rows, the 128B swizzle

__device__ __forceinline__ uint32_t smem(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

__global__ void tile_double_kernel(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst) {
    __shared__ alignas(1024) float tile[T * T];
    __shared__ alignas(8) uint64_t bar;
    const int x = blockIdx.x * T, y = blockIdx.y * T;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(1));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem(&bar)), "r"(T * T * 4));
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                     :: "r"(smem(tile)), "l"(&src), "r"(x), "r"(y), "r"(smem(&bar)) : "memory");
    }
    __syncthreads();
    asm volatile("{\n.reg .pred P1;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
                 "@P1 bra.uni DONE;\nbra.uni WAIT;\nDONE:\n}\n" :: "r"(smem(&bar)), "r"(0));
    for (int i = threadIdx.x; i < T * T; i += blockDim.x) tile[i] *= 2.0f;   // elementwise: the swizzle is moot
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(&dst), "r"(x), "r"(y), "r"(smem(tile)) : "memory");
        asm volatile("cp.async.bulk.commit_group;");
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    }
}

static CUtensorMap tile_map(void* base, int rows, int cols) {
    CUtensorMap map;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)cols * sizeof(float)};
    cuuint32_t box[2] = {T, T}, estrides[2] = {1, 1};
    CUresult rc = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, estrides,
                                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                         CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    const char* why = nullptr;
    cuGetErrorString(rc, &why);
    TORCH_CHECK(rc == CUDA_SUCCESS, "cuTensorMapEncodeTiled: ", why);
    return map;
}

torch::Tensor tile_double(int64_t src, torch::Tensor out) {
    const int rows = out.size(0), cols = out.size(1);
    CUtensorMap in_map = tile_map(reinterpret_cast<void*>(src), rows, cols);
    CUtensorMap out_map = tile_map(out.data_ptr<float>(), rows, cols);
    dim3 grid((cols + T - 1) / T, (rows + T - 1) / T);
    tile_double_kernel<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(in_map, out_map);
    return out;
}
"""


def main():
    mode = sys.argv[1]
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    rank, world = dist.get_rank(), dist.get_world_size()
    ext = load_inline(name="pkb_test_tma_peer_copy", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                      functions=["tile_double"])
    rows, cols = 40, 64
    buf = symm_mem.empty((rows, cols), dtype=torch.float32, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    buf.copy_(torch.arange(rows * cols, dtype=torch.float32, device="cuda").reshape(rows, cols) + 1000 * rank)
    if mode == "ok":
        dist.barrier()
    peer = (rank + 1) % world
    out = torch.zeros(rows, cols, dtype=torch.float32, device="cuda")
    ext.tile_double(hdl.buffer_ptrs[peer], out)
    torch.cuda.synchronize()
    expect = (torch.arange(rows * cols, dtype=torch.float32, device="cuda").reshape(rows, cols) + 1000 * peer) * 2
    assert torch.equal(out, expect), f"rank {rank}: wrong tile copy"
    dist.barrier()
    print("copied", rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

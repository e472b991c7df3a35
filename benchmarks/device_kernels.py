"""Microbenchmark kernels for benchmarks/device_kernel_model_check.py: Triton and inline-CUDA kernels of the kinds
multi-GPU candidates launch, with "peer" buffers mapped to local memory (one GPU, world size 1): copy, strided
read, a reduction over k buffers reached through a pointer table, atomics spread and on one address, a flag
ping-pong between two blocks, and one thread's chains of flag waits, fences, release stores and CASes. Imports only torch and triton, so it runs on a GPU machine without the simulator
and, unchanged, on simulated ranks (where "cuda" is the CPU and the kernels run on pkb's interpreters).

A case is (name, n on the GPU, n on pkb's interpreters, grid rule): "scale" grids grow with n, "fixed" grids
do not (the work per block does). A ping-pong's n is its rounds, the same on both sides (a protocol's hops do
not scale with data).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

F32 = 4


@triton.jit
def t_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@triton.jit
def t_copy_loop(src, dst, n, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


@triton.jit
def t_strided(src, dst, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs * STRIDE, mask=m), mask=m)


@triton.jit
def t_reduce(table, dst, n, K: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in tl.static_range(K):
        ptr = tl.load(table + k).to(tl.pointer_type(tl.float32))
        acc += tl.load(ptr + offs, mask=m)
    tl.store(dst + offs, acc, mask=m)


@triton.jit
def t_atomic(cnt, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(cnt + offs % BINS, 1, mask=offs < n)


@triton.jit
def t_cas_sys(flags, n):
    for i in range(n):   # take each set flag (1 -> 0) with a system-scope acq_rel CAS, as Triton barriers do
        tl.atomic_cas(flags + 32 * i, 1, 0, sem="acq_rel", scope="sys")


CUDA_SRC = r"""
#include <torch/extension.h>
struct Table { const float* p[8]; };

__global__ void c_copy(const float* src, float* dst, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}
__global__ void c_copy4_loop(const float4* src, float4* dst, long n4) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) dst[i] = src[i];
}
__global__ void c_strided(const float* src, float* dst, long n, int stride) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i * stride];
}
__global__ void c_reduce(Table t, float* dst, long n, int k) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) acc += t.p[j][i];
  dst[i] = acc;
}
__global__ void c_atomic(int* cnt, long n, int bins) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(cnt + (i % bins), 1);
}
__global__ void c_pingpong(volatile int* flags, int iters) {
  if (threadIdx.x) return;
  for (int i = 1; i <= iters; ++i) {
    if (blockIdx.x == 0) { flags[0] = i; __threadfence(); while (flags[1] != i) {} }
    else { while (flags[0] != i) {} __threadfence(); flags[1] = i; }
  }
}

// Synchronisation on one block's chain (thread 0 of one block; flag words 128 B apart, all set to 1 by a fill
// just before the launch, so every wait passes on its first read): n waits, n fences after a store, n release
// stores, n CASes that each take a set flag (1 -> 0).
__global__ void c_poll_acquire(const unsigned* flags, int n) {
  if (threadIdx.x) return;
  for (int p = 0; p < n; ++p) {
    unsigned v;
    do { asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flags + 32 * p) : "memory"); } while (v < 1u);
  }
}
__global__ void c_poll_volatile(volatile unsigned* flags, int n) {
  if (threadIdx.x) return;
  for (int p = 0; p < n; ++p) { while (flags[32 * p] < 1u) {} }
}
__global__ void c_fence_sys(volatile unsigned* flags, int n) {
  if (threadIdx.x) return;
  for (int p = 0; p < n; ++p) { flags[32 * p] = 2u; __threadfence_system(); }
}
__global__ void c_fence_gpu(volatile unsigned* flags, int n) {
  if (threadIdx.x) return;
  for (int p = 0; p < n; ++p) { flags[32 * p] = 2u; __threadfence(); }
}
__global__ void c_release_sys(unsigned* flags, int n) {
  if (threadIdx.x) return;
  for (int p = 0; p < n; ++p) asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(flags + 32 * p), "r"(2u) : "memory");
}
__global__ void c_cas_sys(unsigned* flags, int n) {
  if (threadIdx.x) return;
  for (int p = 0; p < n; ++p) {
    unsigned old;
    do {
      asm volatile("atom.acq_rel.sys.global.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(flags + 32 * p), "r"(1u), "r"(0u) : "memory");
    } while (old != 1u);
  }
}

// A few warps bound by their own latency, not the schedulers (held out for device_kernel.WARP_ISSUE_CYCLES):
// `rounds` shared-memory tree sums of the block's values, a barrier after each level.
__global__ void c_smem_tree(float* out, int rounds) {
  __shared__ float s[1024];
  float v = (float)threadIdx.x;
  for (int r = 0; r < rounds; ++r) {
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
      if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
      __syncthreads();
    }
    v = 0.5f * s[0] + v;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

static unsigned blocks_for(long n, int threads) { return (unsigned)((n + threads - 1) / threads); }

void copy(torch::Tensor src, torch::Tensor dst) {
  long n = src.numel(); c_copy<<<blocks_for(n, 256), 256>>>(src.data_ptr<float>(), dst.data_ptr<float>(), n);
}
void copy4_loop(torch::Tensor src, torch::Tensor dst, int64_t grid) {
  c_copy4_loop<<<(unsigned)grid, 256>>>((const float4*)src.data_ptr<float>(), (float4*)dst.data_ptr<float>(),
                                        src.numel() / 4);
}
void strided(torch::Tensor src, torch::Tensor dst, int64_t stride) {
  long n = dst.numel();
  c_strided<<<blocks_for(n, 256), 256>>>(src.data_ptr<float>(), dst.data_ptr<float>(), n, (int)stride);
}
void reduce(torch::Tensor bufs, torch::Tensor dst) {
  Table t; int k = (int)bufs.size(0); long n = bufs.size(1);
  for (int j = 0; j < k; ++j) t.p[j] = bufs.data_ptr<float>() + j * n;
  c_reduce<<<blocks_for(n, 256), 256>>>(t, dst.data_ptr<float>(), n, k);
}
void atomic(torch::Tensor cnt, int64_t n) {
  c_atomic<<<blocks_for(n, 256), 256>>>(cnt.data_ptr<int>(), n, (int)cnt.numel());
}
void pingpong(torch::Tensor flags, int64_t iters) {
  c_pingpong<<<2, 32>>>((volatile int*)flags.data_ptr<int>(), (int)iters);
}
void smem_tree(torch::Tensor out, int64_t rounds, int64_t blocks, int64_t threads) {
  c_smem_tree<<<(unsigned)blocks, (unsigned)threads>>>(out.data_ptr<float>(), (int)rounds);
}
void sync_chain(torch::Tensor flags, int64_t n, int64_t kind) {
  unsigned* f = (unsigned*)flags.data_ptr<int>();
  switch (kind) {
    case 0: c_poll_acquire<<<1, 32>>>(f, (int)n); break;
    case 1: c_poll_volatile<<<1, 32>>>(f, (int)n); break;
    case 2: c_fence_sys<<<1, 32>>>(f, (int)n); break;
    case 3: c_fence_gpu<<<1, 32>>>(f, (int)n); break;
    case 4: c_release_sys<<<1, 32>>>(f, (int)n); break;
    default: c_cas_sys<<<1, 32>>>(f, (int)n);
  }
}
"""
CPP_SRC = """
void copy(torch::Tensor src, torch::Tensor dst);
void copy4_loop(torch::Tensor src, torch::Tensor dst, int64_t grid);
void strided(torch::Tensor src, torch::Tensor dst, int64_t stride);
void reduce(torch::Tensor bufs, torch::Tensor dst);
void atomic(torch::Tensor cnt, int64_t n);
void pingpong(torch::Tensor flags, int64_t iters);
void sync_chain(torch::Tensor flags, int64_t n, int64_t kind);
void smem_tree(torch::Tensor out, int64_t rounds, int64_t blocks, int64_t threads);
"""
_ext = None


def cuda_ext():
    """The extension, built once; a failed build fails every CUDA case at once, not once per case."""
    global _ext
    if isinstance(_ext, Exception):
        raise _ext
    if _ext is None:
        from torch.utils.cpp_extension import load_inline
        try:
            _ext = load_inline("pkb_device_kernels", CPP_SRC, cuda_sources=CUDA_SRC,
                               functions=["copy", "copy4_loop", "strided", "reduce", "atomic", "pingpong",
                                          "sync_chain", "smem_tree"],
                               extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"])
        except Exception as e:
            _ext = e
            raise
    return _ext


def _rand(n, dev):
    return torch.rand(n, device=dev)


def symmetric_zeros(n: int) -> torch.Tensor:
    """int32 zeros in symmetric memory, the kind a multi-GPU kernel's flags live in, on a group of one rank
    (made here on first use where the caller has none: a GPU machine's single process)."""
    import os

    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    if not dist.is_initialized():
        for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                           ("MASTER_PORT", "29531")):
            os.environ.setdefault(key, value)
        dist.init_process_group("nccl")
        torch.cuda.set_device(0)
    t = symm_mem.empty(n, dtype=torch.int32, device="cuda")
    symm_mem.rendezvous(t, dist.group.WORLD)
    return t.zero_()


def setup(name: str, n: int, dev) -> tuple:
    """(launch: a callable that launches the case's kernel once, bytes it must move)."""
    k = {"reduce4": 4, "reduce8": 8}
    if name in ("t_copy", "c_copy"):
        src, dst = _rand(n, dev), torch.empty(n, device=dev)
        if name == "t_copy":
            return (lambda: t_copy[(triton.cdiv(n, 1024),)](src, dst, n, BLOCK=1024)), 2 * n * F32
        ext = cuda_ext()
        return (lambda: ext.copy(src, dst)), 2 * n * F32
    if name.startswith(("t_copy_grid", "c_copy4_grid")):
        src, dst, g = _rand(n, dev), torch.empty(n, device=dev), int(name.rsplit("grid", 1)[1])
        if name.startswith("t_"):
            return (lambda: t_copy_loop[(g,)](src, dst, n, BLOCK=1024)), 2 * n * F32
        ext = cuda_ext()
        return (lambda: ext.copy4_loop(src, dst, g)), 2 * n * F32
    if name in ("t_strided8", "c_strided8"):
        src, dst = _rand(8 * n, dev), torch.empty(n, device=dev)
        if name == "t_strided8":
            return (lambda: t_strided[(triton.cdiv(n, 1024),)](src, dst, n, STRIDE=8, BLOCK=1024)), 9 * n * F32
        ext = cuda_ext()
        return (lambda: ext.strided(src, dst, 8)), 9 * n * F32
    for prefix in ("t_", "c_"):
        for r, kk in k.items():
            if name == prefix + r:
                bufs, dst = _rand(kk * n, dev).view(kk, n), torch.empty(n, device=dev)
                if prefix == "t_":
                    table = torch.tensor([bufs[j].data_ptr() for j in range(kk)], dtype=torch.int64, device=dev)
                    return (lambda: t_reduce[(triton.cdiv(n, 1024),)](table, dst, n, K=kk, BLOCK=1024)), \
                        (kk + 1) * n * F32
                ext = cuda_ext()
                return (lambda: ext.reduce(bufs, dst)), (kk + 1) * n * F32
    if name.startswith(("t_atomic", "c_atomic")):
        bins = 1 if name.endswith("hot") else n
        cnt = torch.zeros(bins, dtype=torch.int32, device=dev)
        if name.startswith("t_"):
            return (lambda: t_atomic[(triton.cdiv(n, 1024),)](cnt, n, BINS=bins, BLOCK=1024)), n * F32
        ext = cuda_ext()
        return (lambda: ext.atomic(cnt, n)), n * F32
    if name == "c_pingpong":   # n: rounds
        flags = torch.zeros(2, dtype=torch.int32, device=dev)
        ext = cuda_ext()

        def run():
            flags.zero_()
            ext.pingpong(flags, n)
        return run, 0
    if name.startswith("c_smem_tree"):   # n: rounds; c_smem_tree<blocks>x<threads>
        blocks, threads = map(int, name.removeprefix("c_smem_tree").split("x"))
        out = torch.empty(blocks * threads, device=dev)
        ext = cuda_ext()
        return (lambda: ext.smem_tree(out, n, blocks, threads)), 0
    if name == "t_cas_sys":
        flags = torch.zeros(32 * n, dtype=torch.int32, device=dev)

        def cas_chain():
            flags.fill_(1)
            t_cas_sys[(1,)](flags, n, num_warps=1)
        return cas_chain, 0
    base = name.removesuffix("_symm")
    if base in SYNC_CHAINS:   # n: waits, fences, release stores or CASes on one thread's chain
        flags = symmetric_zeros(32 * n) if name.endswith("_symm") else torch.zeros(32 * n, dtype=torch.int32,
                                                                                     device=dev)
        ext = cuda_ext()

        def chain():
            flags.fill_(1)
            ext.sync_chain(flags, n, SYNC_CHAINS.index(base))
        return chain, 0
    raise KeyError(name)


def kernel_name(case: str) -> str:
    """The kernel function a case launches (its name in a profile)."""
    backend, _, kind = case.partition("_")
    for prefix, fn in (("copy_grid", "copy_loop"), ("copy4_grid", "copy4_loop"), ("strided", "strided"),
                       ("reduce", "reduce"), ("atomic", "atomic"), ("smem_tree", "smem_tree")):
        if kind.startswith(prefix):
            return f"{backend}_{fn}"
    return case.removesuffix("_symm")


SYNC_CHAINS = ["c_poll_acquire", "c_poll_volatile", "c_fence_sys", "c_fence_gpu", "c_release_sys", "c_cas_sys"]
MI = 1 << 20
# (name, n on the GPU, n on pkb's interpreters, grid rule)
CASES = [
    ("t_copy", 64 * MI, 64 * 1024, "scale"),
    ("t_copy", 16 * MI, 64 * 1024, "scale"),
    ("c_copy", 64 * MI, 16 * 1024, "scale"),
    ("c_copy", 16 * MI, 16 * 1024, "scale"),
    ("t_copy", 32 * MI, 64 * 1024, "scale"),
    ("c_copy", 32 * MI, 16 * 1024, "scale"),
    ("t_copy_grid16", 16 * MI, 64 * 1024, "fixed"),
    ("c_copy4_grid16", 16 * MI, 64 * 1024, "fixed"),
    ("t_copy_grid64", 16 * MI, 256 * 1024, "fixed"),
    ("c_copy4_grid64", 16 * MI, 256 * 1024, "fixed"),
    ("t_strided8", 16 * MI, 16 * 1024, "scale"),
    ("c_strided8", 16 * MI, 16 * 1024, "scale"),
    ("t_reduce4", 16 * MI, 16 * 1024, "scale"),
    ("t_reduce8", 16 * MI, 16 * 1024, "scale"),
    ("c_reduce4", 16 * MI, 16 * 1024, "scale"),
    ("c_reduce8", 16 * MI, 16 * 1024, "scale"),
    ("t_atomic_spread", 16 * MI, 16 * 1024, "scale"),
    ("t_atomic_spread", 4 * MI, 16 * 1024, "scale"),
    ("t_atomic_hot", 4 * MI, 16 * 1024, "scale"),
    ("t_atomic_hot", 1 * MI, 16 * 1024, "scale"),
    ("c_atomic_spread", 16 * MI, 16 * 1024, "scale"),
    ("c_atomic_spread", 4 * MI, 16 * 1024, "scale"),
    ("c_atomic_hot", 4 * MI, 16 * 1024, "scale"),
    ("c_atomic_hot", 1 * MI, 16 * 1024, "scale"),
    ("c_pingpong", 200, 200, "fixed"),
    ("c_pingpong", 50, 50, "fixed"),
    # added 2026-12-05 (fourth session) after the L2 round-trip rule, before any was measured: 16 blocks looping
    # over 2 and 8 MB, which the L2 holds (the cases above are larger than it); not yet measured: the session's
    # GPU time ran out
    ("t_copy_grid16", 256 * 1024, 64 * 1024, "fixed"),
    ("c_copy4_grid16", 256 * 1024, 64 * 1024, "fixed"),
    ("t_copy_grid16", 1 * MI, 64 * 1024, "fixed"),
    ("c_copy4_grid16", 1 * MI, 64 * 1024, "fixed"),
    # added 2026-12-05 (fifth session), before any was measured: one thread's chain of 64 (and 16) waits that
    # pass on their first read, fences after a store, release stores and flag-taking CASes (n the same on both
    # sides: a protocol's steps do not scale with data)
] + [(name, n, n, "fixed") for name in SYNC_CHAINS for n in (64, 16)] + [
    # added after the first measurement of the chains above, before this one: the same waits and fences on
    # flags in symmetric memory (a symm_mem buffer of a one-rank group), where a test program's eight waits took
    # 0.37 us each against 0.17 on plain memory
    (name + "_symm", n, n, "fixed") for name in ("c_poll_acquire", "c_fence_sys") for n in (64, 16)] + [
    # and a Triton program's chain of system-scope acq_rel CASes, each taking a set flag (the corpora's Triton
    # barriers are such CASes: are they a CUDA .sys CAS each, an L2 round trip and a system fence?)
    ("t_cas_sys", n, n, "fixed") for n in (64, 16)] + [
    # added 2026-12-05 (sixth session) after the few-warp issue rule was fitted on cub's sort, before any was
    # measured: shared-memory tree sums in one block of 4 warps, two of 16, and 32 blocks of 4
    ("c_smem_tree1x128", 200, 200, "fixed"), ("c_smem_tree2x512", 100, 100, "fixed"),
    ("c_smem_tree32x128", 100, 100, "fixed")]

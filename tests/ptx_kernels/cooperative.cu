// Corpus part 2: shared memory, warp collectives, atomics, tensor cores, cp.async, memory ordering.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

extern "C" __global__ void block_reduce_smem(const float* x, float* out, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void warp_reduce_shfl(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}
extern "C" __global__ void warp_scan_up(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  int v = i < n ? x[i] : 0;
  for (int o = 1; o < 32; o <<= 1) { int t = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v += t; }
  if (i < n) y[i] = v;
}
extern "C" __global__ void warp_allreduce_xor(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? x[i] : 0;
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (i < n) y[i] = v;
}
extern "C" __global__ void warp_broadcast_idx(const float* x, float* y, int src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? x[i] : 0.f;
  v = __shfl_sync(0xffffffffu, v, src);
  if (i < n) y[i] = v;
}
extern "C" __global__ void ballot_count(const float* x, unsigned* ballots, int* ranks, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  bool p = i < n && x[i] > 0.f;
  unsigned b = __ballot_sync(0xffffffffu, p);
  if (lane == 0) ballots[i / 32] = b;
  if (i < n) ranks[i] = p ? __popc(b & ((1u << lane) - 1)) : -1;
}
extern "C" __global__ void vote_any_all(const int* x, int* any_, int* all_, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = i < n ? x[i] : 0;
  int a = __any_sync(0xffffffffu, v > 90), b = __all_sync(0xffffffffu, v > 5);
  if ((threadIdx.x & 31) == 0) { any_[i / 32] = a; all_[i / 32] = b; }
}
extern "C" __global__ void atomic_sum(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}
extern "C" __global__ void histogram(const int* x, unsigned* bins, int nbins, int n) {
  __shared__ unsigned local[64];
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(&local[x[i] % nbins], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}
extern "C" __global__ void atomic_minmax(const int* x, int* mx, int* mn, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { atomicMax(mx, x[i]); atomicMin(mn, x[i]); }
}
extern "C" __global__ void cas_increment(int* counter, int* tickets, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int old = *((volatile int*)counter), assumed;
  do { assumed = old; old = atomicCAS(counter, assumed, assumed + 1); } while (old != assumed);
  tickets[i] = old;
}
extern "C" __global__ void exch_inc(unsigned* slot, unsigned* ring, unsigned* got, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  got[i] = atomicExch(slot + (i & 3), (unsigned)i);
  atomicInc(ring, 9u);
}
extern "C" __global__ void smem_transpose(const float* in, float* out, int w, int h) {
  __shared__ float tile[16][17];
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[y * w + x];
  __syncthreads();
  x = blockIdx.y * 16 + threadIdx.x; y = blockIdx.x * 16 + threadIdx.y;
  if (x < h && y < w) out[y * h + x] = tile[threadIdx.x][threadIdx.y];
}
extern "C" __global__ void dyn_smem_reverse(const int* x, int* y, int n) {
  extern __shared__ int buf[];
  int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  if (base + t < n) buf[t] = x[base + t];
  __syncthreads();
  int src = blockDim.x - 1 - t;
  if (base + t < n && base + src < n) y[base + t] = buf[src];
}
extern "C" __global__ void sgemm_tiled(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[16][16], Bs[16][16];
  int r = blockIdx.y * 16 + threadIdx.y, c = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    As[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? A[r * K + k0 + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + c] : 0.f;
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (r < M && c < N) C[r * N + c] = acc;
}
// One warp per 16x8 tile of C = A (MxK, row-major) * B, with B given transposed (NxK, row-major).
extern "C" __global__ void mma_bf16_gemm(const __nv_bfloat16* A, const __nv_bfloat16* Bt, float* C, int M, int N, int K) {
  __shared__ __align__(16) __nv_bfloat16 As[16][16], Bs[8][16];
  int lane = threadIdx.x, m0 = blockIdx.y * 16, n0 = blockIdx.x * 8;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k0 = 0; k0 < K; k0 += 16) {
    for (int e = lane; e < 256; e += 32) As[e / 16][e % 16] = A[(m0 + e / 16) * K + k0 + e % 16];
    for (int e = lane; e < 128; e += 32) Bs[e / 16][e % 16] = Bt[(n0 + e / 16) * K + k0 + e % 16];
    __syncwarp();
    unsigned a[4], b[2];
    int j = lane >> 3, r = lane & 7;
    unsigned pa = (unsigned)__cvta_generic_to_shared(&As[r + 8 * (j & 1)][8 * (j >> 1)]);
    unsigned pb = (unsigned)__cvta_generic_to_shared(&Bs[r][8 * (j & 1)]);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(b[0]), "=r"(b[1]) : "r"(pb));
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    __syncwarp();
  }
  int g = lane >> 2, t = lane & 3;
  C[(m0 + g) * N + n0 + 2 * t] = acc[0];     C[(m0 + g) * N + n0 + 2 * t + 1] = acc[1];
  C[(m0 + g + 8) * N + n0 + 2 * t] = acc[2]; C[(m0 + g + 8) * N + n0 + 2 * t + 1] = acc[3];
}
extern "C" __global__ void wmma_bf16_gemm(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f);
  int m0 = blockIdx.y * 16, n0 = blockIdx.x * 16;
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(fa, A + m0 * K + k0, K);
    wmma::load_matrix_sync(fb, B + k0 * N + n0, N);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(C + m0 * N + n0, fc, N, wmma::mem_row_major);
}
// Double-buffered cp.async: each block sums its chunks of 256 floats, staging them through smem.
extern "C" __global__ void cp_async_sum(const float* x, float* out, int chunks) {
  __shared__ __align__(16) float stage[2][256];
  int t = threadIdx.x;   // 64 threads, 16 bytes each
  const float* base = x + blockIdx.x * chunks * 256;
  auto issue = [&](int c, int buf) {
    unsigned dst = (unsigned)__cvta_generic_to_shared(&stage[buf][t * 4]);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(base + c * 256 + t * 4));
    asm volatile("cp.async.commit_group;");
  };
  float acc = 0.f;
  issue(0, 0);
  for (int c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) { issue(c + 1, (c + 1) & 1); asm volatile("cp.async.wait_group 1;"); }
    else asm volatile("cp.async.wait_group 0;");
    __syncthreads();
    for (int k = 0; k < 4; ++k) acc += stage[c & 1][t * 4 + k];
    __syncthreads();
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  if ((t & 31) == 0) atomicAdd(out + blockIdx.x, acc);
}
extern "C" __global__ void softmax_rows(const float* x, float* y, int cols) {
  __shared__ float red[32];
  const float* row = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < blockDim.x / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < blockDim.x / 32; ++w) s += red[w];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = __expf(row[c] - m) / s;
}
extern "C" __global__ void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int cols, float eps) {
  __shared__ float red[32];
  const __nv_bfloat16* row = x + blockIdx.x * cols;
  float ss = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float v = __bfloat162float(row[c]); ss += v * v; }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x / 32] = ss;
  __syncthreads();
  float tot = 0.f;
  for (int k = 0; k < blockDim.x / 32; ++k) tot += red[k];
  float inv = rsqrtf(tot / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[blockIdx.x * cols + c] = __float2bfloat16(__bfloat162float(row[c]) * inv * __bfloat162float(w[c]));
}
// Block 1 publishes data then a flag with st.release.sys; block 0 spins on ld.acquire.sys.
extern "C" __global__ void acquire_release(int* data, int* flag, int* seen) {
  if (blockIdx.x == 1) {
    data[threadIdx.x] = threadIdx.x * 7 + 1;
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(flag), "r"(1) : "memory");
  } else {
    if (threadIdx.x == 0) {
      unsigned v = 0;
      do { asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory"); if (!v) __nanosleep(100); } while (v == 0);
    }
    __syncthreads();
    seen[threadIdx.x] = data[threadIdx.x];
  }
}
// A grid-wide barrier built from a .sys CAS flag loop, the pattern LLM-written kernels favour.
extern "C" __global__ void sys_cas_barrier(int* arrived, int* out, int nblocks) {
  if (threadIdx.x == 0) {
    atomicAdd_system(arrived, 1);
    int v;
    do { asm volatile("atom.acquire.sys.global.cas.b32 %0, [%1], %2, %2;" : "=r"(v) : "l"(arrived), "r"(nblocks) : "memory"); } while (v != nblocks);
    asm volatile("fence.acq_rel.sys;" ::: "memory");
  }
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = *((volatile int*)arrived) + blockIdx.x;
}
extern "C" __global__ void multimem_allreduce_bf16x2(uint64_t mc_ptr, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n2) return;
  unsigned* p = (unsigned*)mc_ptr + i;
  unsigned v;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.bf16x2 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  asm volatile("multimem.st.relaxed.sys.global.b32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
extern "C" __global__ void unsupported_wgmma(float* out) {
  out[threadIdx.x] = 1.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
// Warp specialisation with named barriers: warp 0 fills a buffer, warps 1-2 consume it, each round.
extern "C" __global__ void named_barrier_pipeline(const float* x, float* y, int rounds) {
  __shared__ float buf[64];
  int w = threadIdx.x / 32, l = threadIdx.x & 31;
  for (int r = 0; r < rounds; ++r) {
    if (w == 0) {
      buf[l] = x[r * 64 + l]; buf[32 + l] = x[r * 64 + 32 + l];
      asm volatile("bar.arrive 1, 96;" ::: "memory");   // buffer full
      asm volatile("bar.sync 2, 96;" ::: "memory");     // wait until it is consumed
    } else {
      asm volatile("bar.sync 1, 96;" ::: "memory");
      int k = (w - 1) * 32 + l;
      y[r * 64 + k] = buf[k] * 2.f + r;
      asm volatile("bar.arrive 2, 96;" ::: "memory");
    }
  }
}

// Corpus part 1: elementwise, integer, bit, conversion and control-flow kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void saxpy(float s, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = s * x[i] + y[i];
}
extern "C" __global__ void int_affine(const int* x, int* y, int mul, int add, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * mul + add;   // wraps like two's complement
}
extern "C" __global__ void relu_clamp(const float* x, float* y, float hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fminf(fmaxf(x[i], 0.f), hi);
}
extern "C" __global__ void bf16_add_f32acc(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}
extern "C" __global__ void bf16_native_mul(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __hmul(a[i], b[i]);
}
extern "C" __global__ void bf16x2_fma(const __nv_bfloat162* a, const __nv_bfloat162* b, const __nv_bfloat162* c, __nv_bfloat162* d, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) d[i] = __hfma2(a[i], b[i], c[i]);
}
extern "C" __global__ void f16_axpby(const __half* x, const __half* y, __half* z, float alpha, float beta, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = __float2half(alpha * __half2float(x[i]) + beta * __half2float(y[i]));
}
extern "C" __global__ void exp_sigmoid(const float* x, float* e, float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { e[i] = expf(x[i]); s[i] = 1.f / (1.f + __expf(-x[i])); }
}
extern "C" __global__ void sqrt_div(const float* x, const float* y, float* a, float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { a[i] = sqrtf(fabsf(x[i])); b[i] = x[i] / y[i]; c[i] = rsqrtf(fabsf(y[i]) + 1.f); }
}
extern "C" __global__ void int_divmod(const int* x, const int* y, int* q, int* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { q[i] = x[i] / y[i]; r[i] = x[i] % y[i]; }
}
extern "C" __global__ void u64_divmod(const unsigned long long* x, unsigned long long d, unsigned long long* q, unsigned long long* r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { q[i] = x[i] / d; r[i] = x[i] % d; }
}
extern "C" __global__ void bit_ops(const unsigned* x, unsigned* popc, unsigned* clz, unsigned* rev, unsigned* mix, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    unsigned v = x[i];
    popc[i] = __popc(v); clz[i] = __clz(v); rev[i] = __brev(v);
    mix[i] = ((v << 7) ^ (v >> 3)) | (v & 0xF0F0u);
  }
}
extern "C" __global__ void mul_hi_wide(const unsigned* a, const unsigned* b, unsigned* hi, unsigned long long* wide, long long* shi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    hi[i] = __umulhi(a[i], b[i]);
    wide[i] = (unsigned long long)a[i] * b[i];
    shi[i] = __mul64hi((long long)a[i] * 977 - 5000000000LL, (long long)b[i] * -3);
  }
}
extern "C" __global__ void float_int_casts(const float* x, int* trunc_, int* round_, int* floor_, float* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    trunc_[i] = (int)x[i]; round_[i] = __float2int_rn(x[i]); floor_[i] = (int)floorf(x[i]);
    back[i] = (float)(trunc_[i] * 3 + 1);
  }
}
extern "C" __global__ void fp8_quantize(const float* x, uint16_t* q, float* deq, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) {
    float2 v = make_float2(x[2 * i], x[2 * i + 1]);
    __nv_fp8x2_storage_t p = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
    q[i] = p;
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(p, __NV_E4M3);
    deq[2 * i] = __half2float(__half(__half_raw{h.x}));
    deq[2 * i + 1] = __half2float(__half(__half_raw{h.y}));
  }
}
extern "C" __global__ void grid_stride_scale(const float* x, float* y, float s, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i] * s;
}
extern "C" __global__ void collatz_steps(const unsigned* x, unsigned* steps, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = x[i], s = 0;
  while (v != 1) { v = (v & 1) ? 3 * v + 1 : v / 2; ++s; }   // divergent trip counts
  steps[i] = s;
}
extern "C" __global__ void branchy(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  if (v % 3 == 0) y[i] = v * 2;
  else if (v % 3 == 1) { int acc = 0; for (int k = 0; k < (v & 7); ++k) acc += k * v; y[i] = acc; }
  else y[i] = -v;
}
extern "C" __global__ void local_array(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int buf[16];
  for (int k = 0; k < 16; ++k) buf[k] = x[i] * k;
  volatile int j = (x[i] & 15);            // dynamic index forces local memory
  y[i] = buf[j] + buf[15 - j];
}
struct Affine { float scale; int shift; float bias; };
extern "C" __global__ void struct_param(Affine p, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * p.scale + (float)p.shift + p.bias;
}
__constant__ float kTaps[5] = {0.1f, 0.2f, 0.4f, 0.2f, 0.1f};
extern "C" __global__ void conv1d_const(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.f;
  for (int k = -2; k <= 2; ++k) { int j = min(max(i + k, 0), n - 1); acc += kTaps[k + 2] * x[j]; }
  y[i] = acc;
}
extern "C" __global__ void grid2d_index(float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = x * 1000.f + y;
}
__device__ __noinline__ float weighted_sum(float x, int k) {
  float s = 0.f;
  for (int i = 0; i < k; ++i) s += x * i;
  return s;
}
__device__ __noinline__ int mix_call(int x) { return x * 3 + (int)weighted_sum((float)x, x & 3); }
extern "C" __global__ void noinline_calls(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = x[i];
  if (v & 1) v = mix_call(v);        // a divergent call into a nested call
  y[i] = v;
}
#include <cstdio>
extern "C" __global__ void printf_formats(const float* x, long long big) {
  if (threadIdx.x < 3)
    printf("t=%d x=%.3f u=%u big=%lld s=%s c=%c%%\n", (int)threadIdx.x, x[threadIdx.x], 4000000000u, big, "ok", 'A' + threadIdx.x);
}

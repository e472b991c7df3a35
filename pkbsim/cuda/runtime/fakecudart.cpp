// A stand-in for libcudart.so.13: nvcc's host stubs register kernels and launch them through these
// entry points; every launch is handed to the simulator (a ctypes callback) instead of a GPU.
// Simulated device memory is host memory. The current device and launch configuration are per thread
// (one thread per simulated rank).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

extern "C" {
struct SimLaunch {
  const char* name;
  const void* host_fun;
  int module;
  unsigned grid[3], block[3];
  size_t shmem;
  void* stream;
  int device;
  void** args;
  int api;  // 0 <<<>>>, 1 cudaLaunchKernel, 2 cooperative, 3 cudaLaunchKernelExC
};
typedef int (*sim_launch_cb)(const SimLaunch*);
typedef int (*sim_sync_cb)(int device);
// a copy (src != nullptr) or a fill of n bytes with `value` (src == nullptr): done by the simulator in the
// calling rank's world, where it is race-checked as a device access; 0 on success
typedef int (*sim_copy_cb)(void* dst, const void* src, size_t n, int value);
}

namespace {
struct Function { const void* host; std::string name; int module; };
struct Config { dim3 grid, block; size_t shmem; void* stream; };

std::mutex mu;
std::vector<Function> functions;
std::vector<const void*> fatbins;
std::vector<std::string> module_paths;
sim_launch_cb launch_cb = nullptr;
// dynamic shared memory a kernel may launch with: 48 KiB unless cudaFuncSetAttribute raises it (sm_90: 227 KiB)
constexpr int kDefaultDynamicShared = 48 << 10;
constexpr int kMaxSharedPerBlock = 227 << 10;
std::unordered_map<const void*, int> max_dynamic_smem;
sim_sync_cb sync_cb = nullptr;
sim_copy_cb copy_cb = nullptr;
int n_devices = 8;
thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
thread_local std::vector<Config> configs;
thread_local std::string error_text;

cudaError_t fail(cudaError_t e) { last_error = e; return e; }

bool find(const void* host, Function* out) {
  std::lock_guard<std::mutex> g(mu);
  for (auto& f : functions)
    if (f.host == host) { *out = f; return true; }
  return false;
}

cudaError_t launch(const void* host, dim3 g, dim3 b, void** args, size_t shmem, void* stream, int api) {
  Function f;
  if (!find(host, &f)) return fail(cudaErrorInvalidDeviceFunction);
  if (!launch_cb) return fail(cudaErrorNoDevice);
  SimLaunch l{f.name.c_str(), host, f.module, {g.x, g.y, g.z}, {b.x, b.y, b.z}, shmem, stream, current_device,
              args, api};
  int rc = launch_cb(&l);
  return rc ? fail(cudaErrorLaunchFailure) : cudaSuccess;
}

cudaError_t copy(void* d, const void* s, size_t n, int value) {
  if (copy_cb) return copy_cb(d, s, n, value) ? fail(cudaErrorLaunchFailure) : cudaSuccess;
  if (s) std::memmove(d, s, n); else std::memset(d, value, n);
  return cudaSuccess;
}

cudaError_t sync() { return (sync_cb && sync_cb(current_device)) ? fail(cudaErrorLaunchFailure) : cudaSuccess; }
}  // namespace

extern "C" {
// ---- the simulator's side (ctypes) --------------------------------------------------------------
void sim_set_launch_callback(sim_launch_cb cb) { launch_cb = cb; }
void sim_set_sync_callback(sim_sync_cb cb) { sync_cb = cb; }
void sim_set_copy_callback(sim_copy_cb cb) { copy_cb = cb; }
void sim_set_device_count(int n) { n_devices = n; }
// A runtime call or symbol the stand-in lacks, noted on the calling (rank) thread: the extension wrapper turns
// the candidate's failure that follows into pkb's "not simulated", naming it.
static thread_local const char* unsupported = nullptr;
void sim_note_unsupported(const char* what) { unsupported = what; }
const char* sim_take_unsupported() { const char* w = unsupported; unsupported = nullptr; return w; }
int sim_num_modules() { std::lock_guard<std::mutex> g(mu); return (int)fatbins.size(); }
const void* sim_module_fatbin(int i) { std::lock_guard<std::mutex> g(mu); return fatbins.at(i); }
const char* sim_module_path(int i) { std::lock_guard<std::mutex> g(mu); return module_paths.at(i).c_str(); }
void sim_set_error_text(const char* text) { error_text = text ? text : ""; }
int sim_max_dynamic_smem(const void* host) {
  std::lock_guard<std::mutex> g(mu);
  auto it = max_dynamic_smem.find(host);
  return it == max_dynamic_smem.end() ? kDefaultDynamicShared : it->second;
}

// ---- registration (nvcc's static constructors) --------------------------------------------------
void** __cudaRegisterFatBinary(void* fatCubin) {
  Dl_info info{};
  std::string path = dladdr(fatCubin, &info) && info.dli_fname ? info.dli_fname : "?";
  std::lock_guard<std::mutex> g(mu);
  fatbins.push_back(fatCubin);
  module_paths.push_back(path);
  void** handle = new void*[1];
  handle[0] = reinterpret_cast<void*>(static_cast<intptr_t>(fatbins.size() - 1));
  return handle;
}
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
char __cudaInitModule(void**) { return 1; }
void __cudaRegisterFunction(void** handle, const char* hostFun, char*, const char* deviceName, int, uint3*, uint3*,
                            dim3*, dim3*, int*) {
  std::lock_guard<std::mutex> g(mu);
  functions.push_back({hostFun, deviceName, static_cast<int>(reinterpret_cast<intptr_t>(handle[0]))});
}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
void __cudaRegisterManagedVar(void**, void**, char*, const char*, int, size_t, int, int) {}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, struct CUstream_st* stream) {
  configs.push_back({grid, block, shmem, stream});
  return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shmem, void* stream) {
  if (configs.empty()) return fail(cudaErrorMissingConfiguration);
  Config c = configs.back();
  configs.pop_back();
  *grid = c.grid; *block = c.block; *shmem = c.shmem;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(hostFun));
  return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void** args, size_t shmem, cudaStream_t s) {
  return launch(reinterpret_cast<const void*>(k), g, b, args, shmem, s, 0);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void** args, size_t shmem, cudaStream_t s) {
  return launch(reinterpret_cast<const void*>(k), g, b, args, shmem, s, 0);
}

// ---- launches called by user code -------------------------------------------------------------
cudaError_t cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t shmem, cudaStream_t s) {
  return launch(f, g, b, args, shmem, s, 1);
}
cudaError_t cudaLaunchCooperativeKernel(const void* f, dim3 g, dim3 b, void** args, size_t shmem, cudaStream_t s) {
  return launch(f, g, b, args, shmem, s, 2);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* f, void** args) {
  return launch(f, c->gridDim, c->blockDim, args, c->dynamicSmemBytes, c->stream, 3);
}

// ---- errors and devices --------------------------------------------------------------------------
cudaError_t cudaGetLastError() { cudaError_t e = last_error; last_error = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError() { return last_error; }
const char* cudaGetErrorString(cudaError_t e) {
  if (e == cudaErrorLaunchFailure && !error_text.empty()) return error_text.c_str();
  return e == cudaSuccess ? "no error" : e == cudaErrorLaunchFailure ? "unspecified launch failure (simulator)"
                                                                     : "CUDA error (simulator)";
}
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorSimulator"; }
cudaError_t cudaGetDevice(int* d) { *d = current_device; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= n_devices) return fail(cudaErrorInvalidDevice);
  current_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* n) { *n = n_devices; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize() { return sync(); }
cudaError_t cudaDriverGetVersion(int* v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaDeviceCanAccessPeer(int* can, int, int) { *can = 1; return cudaSuccess; }
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned) { return cudaSuccess; }
cudaError_t cudaDeviceGetStreamPriorityRange(int* lo, int* hi) { if (lo) *lo = 0; if (hi) *hi = -5; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->name, sizeof(p->name), "NVIDIA H200 (pkb simulated)");
  p->major = 9; p->minor = 0; p->multiProcessorCount = 132; p->warpSize = 32;
  p->maxThreadsPerBlock = 1024; p->maxThreadsPerMultiProcessor = 2048;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff; p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->sharedMemPerBlock = 48 << 10; p->sharedMemPerBlockOptin = 227 << 10;
  p->sharedMemPerMultiprocessor = 228 << 10; p->regsPerBlock = 65536; p->totalGlobalMem = 141ull << 30;
  p->l2CacheSize = 50 << 20; p->cooperativeLaunch = 1; p->concurrentKernels = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d) {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, d);
  switch (a) {
    case cudaDevAttrMultiProcessorCount: *v = p.multiProcessorCount; break;
    case cudaDevAttrMaxThreadsPerBlock: *v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrComputeCapabilityMajor: *v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *v = p.minor; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrCooperativeLaunch: *v = 1; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = p.maxThreadsPerMultiProcessor; break;
    default: *v = 0;
  }
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute a, int v) {
  if (a != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (v < 0 || v > kMaxSharedPerBlock) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> g(mu);
  max_dynamic_smem[f] = v;
  return cudaSuccess;
}
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void*) {
  std::memset(a, 0, sizeof(*a));
  a->maxThreadsPerBlock = 1024;
  // device code is built for compute_90a (build.py): cub picks its tuning policy from ptxVersion and returns
  // cudaErrorInvalidDeviceFunction, launching nothing, when it matches no architecture it was compiled for
  a->ptxVersion = 90;
  a->binaryVersion = 90;
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, const void*, int, size_t) { *n = 1; return cudaSuccess; }
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void*, int, size_t, unsigned) {
  *n = 1;
  return cudaSuccess;
}

// ---- streams and events: work runs synchronously in the launching thread -----------------------
cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = reinterpret_cast<cudaStream_t>(new char[1]); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete[] reinterpret_cast<char*>(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return sync(); }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* st) {
  *st = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaStreamGetPriority(cudaStream_t, int* p) { *p = 0; return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = reinterpret_cast<cudaEvent_t>(new char[1]); return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete[] reinterpret_cast<char*>(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventRecordWithFlags(cudaEvent_t, cudaStream_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return sync(); }
cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.f; return cudaSuccess; }

// ---- memory: host memory stands in for device memory ---------------------------------------------
cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256 ?: 256);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMallocHost(void** p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { return cudaMalloc(p, n); }
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }
// copies and fills run in stream order as the simulated device runs everything (at the call, on the rank's
// thread), and through the simulator, which race-checks the symmetric memory they touch
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { return copy(d, s, n, 0); }
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { return copy(d, s, n, 0); }
cudaError_t cudaMemcpyPeer(void* d, int, const void* s, int, size_t n) { return copy(d, s, n, 0); }
cudaError_t cudaMemcpyPeerAsync(void* d, int, const void* s, int, size_t n, cudaStream_t) { return copy(d, s, n, 0); }
cudaError_t cudaMemset(void* p, int v, size_t n) { return copy(p, nullptr, n, v); }
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) { return copy(p, nullptr, n, v); }
}

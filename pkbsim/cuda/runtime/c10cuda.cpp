// A stand-in for libc10_cuda.so (and the few at::cuda functions an extension calls): devices and
// streams answer for the calling rank's thread, and CUDA errors raise as c10 errors (RuntimeError in
// Python). It also wraps torch's CPU allocator so the simulator can tell which CPU allocation an
// address a kernel receives belongs to (sim_find_allocation): a pointer into no live allocation is a
// clear memory fault instead of a read of whatever lies there.
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/CPUAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace c10::cuda {
DeviceIndex device_count() noexcept { int n = 0; cudaGetDeviceCount(&n); return static_cast<DeviceIndex>(n); }
DeviceIndex device_count_ensure_non_zero() { return device_count(); }
DeviceIndex current_device() { int d = 0; cudaGetDevice(&d); return static_cast<DeviceIndex>(d); }
void set_device(DeviceIndex d, const bool) { C10_CUDA_CHECK(cudaSetDevice(d)); }
void device_synchronize() { C10_CUDA_CHECK(cudaDeviceSynchronize()); }
void warn_or_error_on_sync() {}
cudaError_t GetDeviceCount(int* n) { return cudaGetDeviceCount(n); }
cudaError_t GetDevice(DeviceIndex* d) { *d = current_device(); return cudaSuccess; }
cudaError_t SetDevice(DeviceIndex d, const bool) { return d < 0 ? cudaSuccess : cudaSetDevice(d); }
cudaError_t MaybeSetDevice(DeviceIndex d) { return SetDevice(d); }
DeviceIndex ExchangeDevice(DeviceIndex d) {
  DeviceIndex old = current_device();
  if (d >= 0 && d != old) set_device(d);
  return old;
}
DeviceIndex MaybeExchangeDevice(DeviceIndex d) { return ExchangeDevice(d); }
void SetTargetDevice() {}
bool hasPrimaryContext(DeviceIndex) { return true; }
std::optional<DeviceIndex> getDeviceIndexWithPrimaryContext() { return current_device(); }

// Streams: id 0 is the default stream (handle nullptr); pool streams have even ids; external handles
// are kept in odd ids (handle << 1 | 1).
static CUDAStream make(DeviceIndex d, StreamId id) {
  return CUDAStream(CUDAStream::UNCHECKED, Stream(Stream::UNSAFE, Device(DeviceType::CUDA, d), id));
}
static DeviceIndex pick(DeviceIndex d) { return d < 0 ? current_device() : d; }
static thread_local std::unordered_map<int, StreamId> current_stream;
static std::atomic<StreamId> next_pool{2};

cudaStream_t CUDAStream::stream() const {
  StreamId id = stream_.id();
  return (id & 1) ? reinterpret_cast<cudaStream_t>(id >> 1) : nullptr;
}
bool CUDAStream::query() const { return true; }
void CUDAStream::synchronize() const { C10_CUDA_CHECK(cudaStreamSynchronize(stream())); }
CUDAStream getStreamFromPool(const bool, DeviceIndex d) { return make(pick(d), next_pool.fetch_add(2)); }
CUDAStream getStreamFromPool(const int, DeviceIndex d) { return make(pick(d), next_pool.fetch_add(2)); }
CUDAStream getStreamFromExternal(cudaStream_t s, DeviceIndex d) {
  return make(pick(d), static_cast<StreamId>(reinterpret_cast<intptr_t>(s) << 1 | 1));
}
CUDAStream getDefaultCUDAStream(DeviceIndex d) { return make(pick(d), 0); }
CUDAStream getCurrentCUDAStream(DeviceIndex d) {
  d = pick(d);
  auto it = current_stream.find(d);
  return make(d, it == current_stream.end() ? 0 : it->second);
}
void setCurrentCUDAStream(CUDAStream s) { current_stream[s.device_index()] = s.id(); }
std::ostream& operator<<(std::ostream& os, const CUDAStream& s) { return os << s.unwrap(); }

void c10_cuda_check_implementation(const int32_t err, const char* file, const char* fn, const uint32_t line,
                                   const bool) {
  if (err == cudaSuccess) return;
  TORCH_CHECK(false, "CUDA error: ", cudaGetErrorString(static_cast<cudaError_t>(err)), " at ", file, ":", line,
              " in ", fn);
}

namespace CUDACachingAllocator {
std::atomic<CUDAAllocator*> allocator{nullptr};
}
}  // namespace c10::cuda

extern "C" void sim_note_unsupported(const char* what);

namespace {
// a library call pkb does not simulate: noted, so that the candidate's failure that follows is pkb's limit
[[noreturn]] void not_simulated(const char* what) {
  sim_note_unsupported(what);
  TORCH_CHECK(false, "simulator: ", what, " is not simulated");
  std::abort();
}
}  // namespace

namespace at::cuda {
cudaDeviceProp* getDeviceProperties(c10::DeviceIndex d) {
  static thread_local cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, d);
  return &prop;
}
cudaDeviceProp* getCurrentDeviceProperties() { return getDeviceProperties(c10::cuda::current_device()); }
int warp_size() { return 32; }
bool canDeviceAccessPeer(c10::DeviceIndex, c10::DeviceIndex) { return true; }
c10::Allocator* getCUDADeviceAllocator() { not_simulated("at::cuda::getCUDADeviceAllocator() (the CUDA caching allocator)"); }
cublasHandle_t getCurrentCUDABlasHandle(bool) { not_simulated("at::cuda::getCurrentCUDABlasHandle() (cuBLAS)"); }
cublasLtHandle_t getCurrentCUDABlasLtHandle() { not_simulated("at::cuda::getCurrentCUDABlasLtHandle() (cuBLASLt)"); }
cusparseHandle_t getCurrentCUDASparseHandle() { not_simulated("at::cuda::getCurrentCUDASparseHandle() (cuSPARSE)"); }
cusolverDnHandle_t getCurrentCUDASolverDnHandle() { not_simulated("at::cuda::getCurrentCUDASolverDnHandle() (cuSOLVER)"); }
}  // namespace at::cuda

// ---- tracked CPU allocations ---------------------------------------------------------------------
namespace {
std::mutex alloc_mu;
std::map<uintptr_t, std::pair<size_t, c10::DataPtr>> live;  // data address -> (bytes, the inner allocation)

void tracked_delete(void* data) {
  c10::DataPtr inner;
  {
    std::lock_guard<std::mutex> g(alloc_mu);
    auto it = live.find(reinterpret_cast<uintptr_t>(data));
    if (it == live.end()) return;
    inner = std::move(it->second.second);
    live.erase(it);
  }
}  // `inner` frees the memory here

struct TrackedCPUAllocator final : c10::Allocator {
  c10::Allocator* inner;
  explicit TrackedCPUAllocator(c10::Allocator* a) : inner(a) {}
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr p = inner->allocate(n);
    void* data = p.get();
    if (data == nullptr) return p;
    c10::Device dev = p.device();
    {
      std::lock_guard<std::mutex> g(alloc_mu);
      live[reinterpret_cast<uintptr_t>(data)] = {n, std::move(p)};
    }
    return {data, data, &tracked_delete, dev};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &tracked_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};
}  // namespace

extern "C" {
// Route new CPU allocations through the tracker (idempotent).
void sim_track_cpu_allocations() {
  static TrackedCPUAllocator* tracker = nullptr;
  if (tracker != nullptr) return;
  tracker = new TrackedCPUAllocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(tracker, /*priority=*/100);
}
// The live tracked allocation holding `addr`: 1 and its base and size, or 0.
int sim_find_allocation(uintptr_t addr, uintptr_t* base, size_t* size) {
  std::lock_guard<std::mutex> g(alloc_mu);
  auto it = live.upper_bound(addr);
  if (it == live.begin()) return 0;
  --it;
  if (addr >= it->first + it->second.first) return 0;
  *base = it->first;
  *size = it->second.first;
  return 1;
}
// Called by the per-extension stubs for CUDA/torch symbols the simulator does not provide.
void sim_note_unsupported(const char* what);
void sim_missing_symbol(const char* what) {
  sim_note_unsupported(what);
  TORCH_CHECK(false, "simulator: unsupported CUDA/torch symbol: ", what);
}
}

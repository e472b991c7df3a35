// Force-included before a candidate's CUDA source (pkb's inline-CUDA build). The torch headers are
// compiled with NDEBUG, as libtorch was (their debug-only asserts reject the CPU devices the rewritten
// source uses); the candidate's own assert() still works. The Sim* guards accept a CPU device, which
// is what CUDA devices become here, and then keep the rank's current device.
#pragma once
#ifndef NDEBUG
#define PKB_RESTORE_DEBUG
#define NDEBUG
#endif
#include <cuda.h>
#include <cuda_runtime.h>
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#ifdef PKB_RESTORE_DEBUG
#undef NDEBUG
#undef PKB_RESTORE_DEBUG
#include <assert.h>
#endif

namespace c10::cuda {
class SimCUDAGuard {
 public:
  explicit SimCUDAGuard(c10::DeviceIndex index) : original_(c10::cuda::current_device()) { set_index(index); }
  explicit SimCUDAGuard(c10::Device device) : SimCUDAGuard(device.is_cuda() ? device.index() : c10::DeviceIndex(-1)) {}
  SimCUDAGuard(const SimCUDAGuard&) = delete;
  SimCUDAGuard& operator=(const SimCUDAGuard&) = delete;
  ~SimCUDAGuard() { c10::cuda::set_device(original_); }
  void set_index(c10::DeviceIndex index) { if (index >= 0) c10::cuda::set_device(index); }
  void set_device(c10::Device device) { set_index(device.is_cuda() ? device.index() : c10::DeviceIndex(-1)); }
  void reset_device(c10::Device device) { set_device(device); }
  c10::Device original_device() const { return c10::Device(c10::DeviceType::CUDA, original_); }
  c10::Device current_device() const { return c10::Device(c10::DeviceType::CUDA, c10::cuda::current_device()); }

 private:
  c10::DeviceIndex original_;
};

class SimOptionalCUDAGuard {
 public:
  SimOptionalCUDAGuard() = default;
  explicit SimOptionalCUDAGuard(std::optional<c10::Device> device) { if (device) set_device(*device); }
  explicit SimOptionalCUDAGuard(std::optional<c10::DeviceIndex> index) { if (index) set_index(*index); }
  SimOptionalCUDAGuard(const SimOptionalCUDAGuard&) = delete;
  SimOptionalCUDAGuard& operator=(const SimOptionalCUDAGuard&) = delete;
  ~SimOptionalCUDAGuard() { reset(); }
  void set_index(c10::DeviceIndex index) {
    if (index < 0) return;
    if (!original_) original_ = c10::cuda::current_device();
    c10::cuda::set_device(index);
  }
  void set_device(c10::Device device) { set_index(device.is_cuda() ? device.index() : c10::DeviceIndex(-1)); }
  void reset_device(c10::Device device) { set_device(device); }
  void reset() {
    if (original_) c10::cuda::set_device(*original_);
    original_.reset();
  }

 private:
  std::optional<c10::DeviceIndex> original_;
};
}  // namespace c10::cuda

namespace at::cuda {
using c10::cuda::SimCUDAGuard;
using c10::cuda::SimOptionalCUDAGuard;
}  // namespace at::cuda

// x.get_device() on a CPU tensor answers the rank's current device, as it would on its GPU.
inline int64_t sim_get_device(const at::TensorBase& t) {
  return t.is_cpu() ? static_cast<int64_t>(c10::cuda::current_device()) : t.get_device();
}

// Force-included after the prelude in a candidate's host unit (pkbsim/cuda/two_units.py), which g++ compiles:
// what nvcc declares for host code and g++ does not see, because CUDA's headers keep it for __CUDACC__.
// A kernel's name here is its host stub, a plain function defined in the kernel unit.
#pragma once
#include <cuda_runtime.h>

extern "C" unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim = 1, size_t sharedMem = 0,
                                                struct CUstream_st* stream = 0);

template <class T>
static inline cudaError_t cudaFuncSetAttribute(T* kernel, enum cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
template <class T>
static inline cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes* attr, T* kernel) {
  return ::cudaFuncGetAttributes(attr, reinterpret_cast<const void*>(kernel));
}
template <class T>
static inline cudaError_t cudaFuncSetCacheConfig(T* kernel, enum cudaFuncCache config) {
  return ::cudaFuncSetCacheConfig(reinterpret_cast<const void*>(kernel), config);
}

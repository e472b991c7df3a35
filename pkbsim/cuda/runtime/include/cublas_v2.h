// pkb stand-in: gives way to the real cuBLAS header wherever one is on the search path (the toolkit's, or that of
// NVIDIA's wheel: toolchain.wheel_headers), so a candidate's cuBLAS calls compile as on a GPU machine and fail
// only when called (pkb's limit); else only the types the ATen/cuda headers name.
#pragma once
#if defined(__has_include_next) && __has_include_next(<cublas_v2.h>)
#include_next <cublas_v2.h>
#else
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;
#endif

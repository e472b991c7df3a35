// pkb stand-in: gives way to the real header (as cublas_v2.h); else only the types the ATen/cuda headers name.
#pragma once
#if defined(__has_include_next) && __has_include_next(<cublasLt.h>)
#include_next <cublasLt.h>
#else
#include "cublas_v2.h"
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_st* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_st* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_st* cublasLtMatmulPreference_t;
#endif

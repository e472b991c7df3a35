// pkb stand-in: only the types the ATen/cuda headers name.
#pragma once
typedef struct cusparseContext* cusparseHandle_t;
typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;
static inline const char* cusparseGetErrorString(cusparseStatus_t) { return "cuSPARSE is not simulated"; }

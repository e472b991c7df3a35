// pkb stand-in: only the types the ATen/cuda headers name.
#pragma once
typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;

// pkb stand-in: only the types the ATen/cuda headers name.
#pragma once
#include "cusolver_common.h"
typedef struct cusolverDnContext* cusolverDnHandle_t;

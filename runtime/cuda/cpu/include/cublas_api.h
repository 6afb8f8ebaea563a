// The cuBLAS types and library calls that Lockstep's host code uses (status codes,
// operations, compute types, the library's version), as the CPU execution layer
// declares them: the names, values and signatures of the cuBLAS of CUDA 13.0, so
// `#include <cublas_api.h>` code compiles unchanged. Implemented by `:cublas`
// (cublaslt_api.cc). Only a subset: no BLAS routines, no cublasHandle_t.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUBLAS_API_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUBLAS_API_H_

#include <stddef.h>
#include <stdint.h>

#include "driver_types.h"
#include "library_types.h"

#ifndef CUBLASWINAPI
#define CUBLASWINAPI
#endif

// The version these declarations follow (the cuBLAS of the CUDA 13.0 toolkit).
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 1
#define CUBLAS_VER_PATCH 0
#define CUBLAS_VER_BUILD 3
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};

enum cublasFillMode_t {
  CUBLAS_FILL_MODE_LOWER = 0,
  CUBLAS_FILL_MODE_UPPER = 1,
  CUBLAS_FILL_MODE_FULL = 2,
};

enum cublasOperation_t {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3,
};

enum cublasPointerMode_t {
  CUBLAS_POINTER_MODE_HOST = 0,
  CUBLAS_POINTER_MODE_DEVICE = 1,
};

// The type products are accumulated in (and whether inputs may be down-converted).
enum cublasComputeType_t {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_32F_EMULATED_16BFX9 = 78,
  CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT = 79,
};

typedef cudaDataType cublasDataType_t;

extern "C" {

// MAJOR_VERSION, MINOR_VERSION or PATCH_LEVEL of the library in *value.
cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int* value);
// The CUDA runtime version the library was built for (CUDART_VERSION encoding).
size_t CUBLASWINAPI cublasGetCudartVersion(void);
// "CUBLAS_STATUS_..." and a sentence describing `status`.
const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status);
const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status);

}  // extern "C"

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUBLAS_API_H_

// The cuBLASLt subset that Lockstep's GEMM wrapper (runtime/cuda/kernels/cublaslt_gemm.cc)
// and device probe use, as the CPU execution layer declares it: the names, enum values
// and signatures of CUDA 13.0's cuBLASLt, so that code compiles unchanged. Implemented
// on the host by `:cublas` (cublaslt_api.cc; docs/gpu.md, "CUDA on the CPU"): matrix
// layouts, matmul descriptors, preferences, a heuristic of synthetic algorithms and a
// stream-ordered fp32 matmul. Settings outside the subset give
// CUBLAS_STATUS_NOT_SUPPORTED.
//
// Thread safety: as cuBLASLt's: a handle and a descriptor may be used from one thread at
// a time; distinct objects from any threads.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUBLASLT_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUBLASLT_H_

#include <stddef.h>
#include <stdint.h>

#include "cublas_api.h"
#include "driver_types.h"
#include "library_types.h"

typedef struct cublasLtContext* cublasLtHandle_t;

// Semi-opaque storage of the descriptors (sizes as cuBLASLt's); use the handles.
typedef struct {
  uint64_t data[8];
} cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

typedef struct {
  uint64_t data[32];
} cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

// An algorithm: a plain value (copy it freely), as cuBLASLt's.
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

// The tile shapes the synthetic algorithms report (CUBLASLT_ALGO_CONFIG_TILE_ID).
enum cublasLtMatmulTile_t {
  CUBLASLT_MATMUL_TILE_UNDEFINED = 0,
  CUBLASLT_MATMUL_TILE_64x64 = 15,
  CUBLASLT_MATMUL_TILE_64x128 = 17,
  CUBLASLT_MATMUL_TILE_128x64 = 18,
  CUBLASLT_MATMUL_TILE_128x128 = 20,
};

enum cublasLtPointerMode_t {
  CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST,
  CUBLASLT_POINTER_MODE_DEVICE = CUBLAS_POINTER_MODE_DEVICE,
  CUBLASLT_POINTER_MODE_DEVICE_VECTOR = 2,
  CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 3,
  CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST = 4,
};

// Memory order of a matrix's elements.
enum cublasLtOrder_t {
  CUBLASLT_ORDER_COL = 0,
  CUBLASLT_ORDER_ROW = 1,
  CUBLASLT_ORDER_COL32 = 2,
  CUBLASLT_ORDER_COL4_4R2_8C = 3,
  CUBLASLT_ORDER_COL32_2R_4R4 = 4,
};

enum cublasLtBatchMode_t {
  CUBLASLT_BATCH_MODE_STRIDED = 0,
  CUBLASLT_BATCH_MODE_POINTER_ARRAY = 1,
};

// Matrix layout attributes (value types as in cuBLASLt).
enum cublasLtMatrixLayoutAttribute_t {
  CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                  // uint32_t (cudaDataType)
  CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                 // int32_t (cublasLtOrder_t)
  CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                  // uint64_t
  CUBLASLT_MATRIX_LAYOUT_COLS = 3,                  // uint64_t
  CUBLASLT_MATRIX_LAYOUT_LD = 4,                    // int64_t
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,           // int32_t, the same on A, B, C and D here
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,  // int64_t elements, >= 0 here
  CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET = 7,          // int64_t, 0 only here
  CUBLASLT_MATRIX_LAYOUT_BATCH_MODE = 8,            // uint32_t, STRIDED only here
};

// Matmul descriptor attributes (value types as in cuBLASLt). The subset takes the
// first eight; bias, auxiliary and scaling pointers are not supported.
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,  // int32_t (cublasComputeType_t)
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,    // int32_t (cudaDataType)
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,  // int32_t (cublasLtPointerMode_t)
  CUBLASLT_MATMUL_DESC_TRANSA = 3,        // int32_t (cublasOperation_t)
  CUBLASLT_MATMUL_DESC_TRANSB = 4,        // int32_t
  CUBLASLT_MATMUL_DESC_TRANSC = 5,        // int32_t
  CUBLASLT_MATMUL_DESC_FILL_MODE = 6,     // int32_t (cublasFillMode_t)
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,      // uint32_t (cublasLtEpilogue_t)
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
  CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE = 14,
  CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = 15,
  CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
  CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
  CUBLASLT_MATMUL_DESC_C_SCALE_POINTER = 19,
  CUBLASLT_MATMUL_DESC_D_SCALE_POINTER = 20,
  CUBLASLT_MATMUL_DESC_AMAX_D_POINTER = 21,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER = 23,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER = 24,
  CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
};

// How split-K partial results are reduced (a bit mask in preferences).
enum cublasLtReductionScheme_t {
  CUBLASLT_REDUCTION_SCHEME_NONE = 0,
  CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
  CUBLASLT_REDUCTION_SCHEME_MASK = 0x7,
};

// What is applied to the product before it is stored; DEFAULT only here.
enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_RELU_AUX = CUBLASLT_EPILOGUE_RELU | 128,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS,
  CUBLASLT_EPILOGUE_RELU_AUX_BIAS = CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS,
  CUBLASLT_EPILOGUE_DRELU = 8 | 128,
  CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_AUX = CUBLASLT_EPILOGUE_GELU | 128,
  CUBLASLT_EPILOGUE_GELU_BIAS = CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS,
  CUBLASLT_EPILOGUE_DGELU = 64 | 128,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};

enum cublasLtMatmulSearch_t {
  CUBLASLT_SEARCH_BEST_FIT = 0,
  CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID = 1,
};

// Preference attributes (value types as in cuBLASLt).
enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,            // uint32_t, BEST_FIT only here
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,    // uint64_t, default 0
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,  // uint32_t, default MASK (all)
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,  // uint32_t, default 256
  CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT = 9,        // float, default 0 (any)
  CUBLASLT_MATMUL_PREF_IMPL_MASK = 12,             // uint64_t, default all
};

// One answer of cublasLtMatmulAlgoGetHeuristic.
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;  // bytes of workspace the algorithm needs for the queried shape
  cublasStatus_t state;  // CUBLAS_STATUS_SUCCESS for every returned result
  float wavesCount;      // output tiles per 132 SMs
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

// Algorithm configuration attributes (value types as in cuBLASLt).
enum cublasLtMatmulAlgoConfigAttributes_t {
  CUBLASLT_ALGO_CONFIG_ID = 0,                // int32_t, read only here
  CUBLASLT_ALGO_CONFIG_TILE_ID = 1,           // uint32_t, read only here
  CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2,        // uint32_t, default 1
  CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3,  // uint32_t, default NONE
  CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4,     // uint32_t
  CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION = 5,     // uint32_t
  CUBLASLT_ALGO_CONFIG_STAGES_ID = 6,         // uint32_t
  CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID = 7,    // uint16_t
  CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8,  // uint16_t
};

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle);
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle);

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status);
const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status);
// major * 10000 + minor * 100 + patch.
size_t CUBLASWINAPI cublasLtGetVersion(void);
size_t CUBLASWINAPI cublasLtGetCudartVersion(void);
cublasStatus_t CUBLASWINAPI cublasLtGetProperty(libraryPropertyType type, int* value);

// D = alpha * op(A) * op(B) + beta * C, enqueued on `stream`. alpha and beta are host
// floats (read during the call); C is not read when beta == 0.
cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    size_t workspaceSizeInBytes, cudaStream_t stream);

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld);
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void* buf, size_t sizeInBytes);
// With sizeInBytes 0, *sizeWritten is the attribute's size.
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             void* buf, size_t sizeInBytes,
                                                             size_t* sizeWritten);

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType);
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes);
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           void* buf, size_t sizeInBytes,
                                                           size_t* sizeWritten);

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes);
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, void* buf,
    size_t sizeInBytes, size_t* sizeWritten);

// Up to requestedAlgoCount algorithms for the operation, best first, each needing at
// most the preference's workspace and alignments. NOT_SUPPORTED (and none) when the
// operation is outside the subset.
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount);

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigSetAttribute(
    cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
    size_t sizeInBytes);
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigGetAttribute(
    const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
    size_t sizeInBytes, size_t* sizeWritten);

}  // extern "C"

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_INCLUDE_CUBLASLT_H_

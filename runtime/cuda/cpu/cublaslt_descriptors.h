// The state behind the CPU execution layer's cuBLASLt handles: what a matrix layout, a
// matmul descriptor, a preference and an algorithm hold (kept inside cuBLASLt's
// semi-opaque structs), their attribute get/set with cuBLASLt's size rules, and the
// check that turns a descriptor and four layouts into one supported matmul problem.
//
// Thread-compatible: an object is used by one thread at a time (as in cuBLASLt).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_DESCRIPTORS_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_DESCRIPTORS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cublasLt.h"
#include "runtime/cuda/cpu/cublaslt_product.h"

namespace lockstep::cuda_cpu::cublaslt {

// Marks live objects (a destroyed or foreign handle is refused, not read).
inline constexpr uint32_t kLayoutMagic = 0x4c4c4159;  // "LLAY"
inline constexpr uint32_t kDescMagic = 0x4c444553;    // "LDES"
inline constexpr uint32_t kPrefMagic = 0x4c505246;    // "LPRF"
inline constexpr uint32_t kAlgoMagic = 0x4c414c47;    // "LALG"

struct LayoutState {
  uint32_t magic = kLayoutMagic;
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  int32_t batch_count = 1;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  int64_t plane_offset = 0;
  uint32_t batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
};

struct DescState {
  uint32_t magic = kDescMagic;
  int32_t compute_type = CUBLAS_COMPUTE_32F;
  int32_t scale_type = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transa = CUBLAS_OP_N;
  int32_t transb = CUBLAS_OP_N;
  int32_t transc = CUBLAS_OP_N;
  int32_t fill_mode = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
};

// Operand indices of the alignment arrays.
enum Operand { kA = 0, kB = 1, kC = 2, kD = 3 };

struct PrefState {
  uint32_t magic = kPrefMagic;
  uint32_t search_mode = CUBLASLT_SEARCH_BEST_FIT;
  uint64_t max_workspace = 0;
  uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t min_alignment[4] = {256, 256, 256, 256};
  float max_waves = 0.0f;
  uint64_t impl_mask = ~uint64_t{0};
};

// A synthetic algorithm. Every one computes the same fma chains (cublaslt_product.h);
// they differ in split-K (the k range is cut into `splitk` parts whose partial sums go
// to the workspace) and in the pointer alignment they require.
struct AlgoState {
  uint32_t magic = kAlgoMagic;
  int32_t id = 0;
  uint32_t tile = CUBLASLT_MATMUL_TILE_UNDEFINED;
  uint32_t splitk = 1;
  uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
  uint32_t required_alignment[4] = {256, 256, 256, 256};
  uint32_t swizzle = 0;
  uint32_t custom = 0;
  uint32_t stages = 0;
  uint16_t inner_shape = 0;
  uint16_t cluster_shape = 0;
  // Injected (cublaslt_faults.h): with n > 1, k's two halves are summed apart.
  uint32_t m_dependent = 0;
};

// Copies a state out of / into its semi-opaque struct.
template <typename State, typename Opaque>
State LoadState(const Opaque& opaque) {
  static_assert(sizeof(State) <= sizeof(Opaque) && std::is_trivially_copyable_v<State>);
  State state;
  std::memcpy(&state, &opaque, sizeof(State));
  return state;
}
template <typename State, typename Opaque>
void StoreState(const State& state, Opaque& opaque) {
  static_assert(sizeof(State) <= sizeof(Opaque) && std::is_trivially_copyable_v<State>);
  std::memset(&opaque, 0, sizeof(Opaque));
  std::memcpy(&opaque, &state, sizeof(State));
}

// Attribute access with cuBLASLt's rules: set needs buf and the exact size; get with
// size 0 reports the size in *written; unknown attributes are NOT_SUPPORTED.
cublasStatus_t SetLayoutAttribute(LayoutState& s, cublasLtMatrixLayoutAttribute_t attr,
                                  const void* buf, size_t size);
cublasStatus_t GetLayoutAttribute(const LayoutState& s, cublasLtMatrixLayoutAttribute_t attr,
                                  void* buf, size_t size, size_t* written);
cublasStatus_t SetDescAttribute(DescState& s, cublasLtMatmulDescAttributes_t attr, const void* buf,
                                size_t size);
cublasStatus_t GetDescAttribute(const DescState& s, cublasLtMatmulDescAttributes_t attr, void* buf,
                                size_t size, size_t* written);
cublasStatus_t SetPrefAttribute(PrefState& s, cublasLtMatmulPreferenceAttributes_t attr,
                                const void* buf, size_t size);
cublasStatus_t GetPrefAttribute(const PrefState& s, cublasLtMatmulPreferenceAttributes_t attr,
                                void* buf, size_t size, size_t* written);
cublasStatus_t SetAlgoAttribute(AlgoState& s, cublasLtMatmulAlgoConfigAttributes_t attr,
                                const void* buf, size_t size);
cublasStatus_t GetAlgoAttribute(const AlgoState& s, cublasLtMatmulAlgoConfigAttributes_t attr,
                                void* buf, size_t size, size_t* written);

// One matmul in the supported subset: D (m x n) = alpha op(A) (m x k) op(B) (k x n)
// + beta C, column-major, inputs bf16 or f32 (both the same), C and D of one type
// (bf16 in -> bf16 or f32 out; f32 in -> f32 out), fp32 compute and scale; or a strided
// batch of them: `batch` products, operand X's matrix b at its pointer + b * stride_x
// elements (every layout has the same batch count; strides >= 0, so 0 repeats a matrix
// for every batch; D's matrices may not overlap).
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  ElementType in = ElementType::kF32;
  ElementType out = ElementType::kF32;
  bool transa = false, transb = false;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  // Stored rows x columns of A and B (op() undone).
  int64_t a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
};

size_t ElementBytes(ElementType type);

// The problem of `desc` and the layouts, or NOT_SUPPORTED (outside the subset) /
// INVALID_VALUE (inconsistent shapes), with the reason in *why.
cublasStatus_t DescribeProblem(const DescState& desc, const LayoutState& a, const LayoutState& b,
                               const LayoutState& c, const LayoutState& d, Problem* problem,
                               std::string* why);

}  // namespace lockstep::cuda_cpu::cublaslt

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_DESCRIPTORS_H_

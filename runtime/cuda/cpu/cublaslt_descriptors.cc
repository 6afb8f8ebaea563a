#include "runtime/cuda/cpu/cublaslt_descriptors.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::cuda_cpu::cublaslt {
namespace {

template <typename T>
cublasStatus_t Set(T& field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t Get(const T& field, void* buf, size_t size, size_t* written) {
  if (size == 0) {
    if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *written = sizeof(T);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(buf, &field, sizeof(T));
  if (written != nullptr) *written = sizeof(T);
  return CUBLAS_STATUS_SUCCESS;
}

// Calls `op` (Set or Get) on the field of `s` that `attr` names; NOT_SUPPORTED otherwise.
#define LOCKSTEP_LT_FIELD(attr_name, field) \
  case attr_name:                           \
    return op(s.field)

template <typename S, typename Op>
cublasStatus_t OnLayout(S& s, cublasLtMatrixLayoutAttribute_t attr, Op op) {
  switch (attr) {
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_TYPE, type);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_ORDER, order);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_LD, ld);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch_count);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, plane_offset);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, batch_mode);
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

template <typename S, typename Op>
cublasStatus_t OnDesc(S& s, cublasLtMatmulDescAttributes_t attr, Op op) {
  switch (attr) {
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute_type);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale_type);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_POINTER_MODE, pointer_mode);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_TRANSA, transa);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_TRANSB, transb);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_TRANSC, transc);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_FILL_MODE, fill_mode);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    default:
      break;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

template <typename S, typename Op>
cublasStatus_t OnPref(S& s, cublasLtMatmulPreferenceAttributes_t attr, Op op) {
  switch (attr) {
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_SEARCH_MODE, search_mode);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, max_workspace);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction_mask);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, min_alignment[kA]);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, min_alignment[kB]);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, min_alignment[kC]);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, min_alignment[kD]);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, max_waves);
    LOCKSTEP_LT_FIELD(CUBLASLT_MATMUL_PREF_IMPL_MASK, impl_mask);
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

template <typename S, typename Op>
cublasStatus_t OnAlgo(S& s, cublasLtMatmulAlgoConfigAttributes_t attr, Op op) {
  switch (attr) {
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_ID, id);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, splitk);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, reduction);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, swizzle);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, custom);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_STAGES_ID, stages);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, inner_shape);
    LOCKSTEP_LT_FIELD(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, cluster_shape);
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

#undef LOCKSTEP_LT_FIELD

// Setter and getter callables for the On* dispatchers.
auto Setter(const void* buf, size_t size) {
  return [=](auto& field) { return Set(field, buf, size); };
}
auto Getter(void* buf, size_t size, size_t* written) {
  return [=](const auto& field) { return Get(field, buf, size, written); };
}

bool IsElementType(uint32_t type, ElementType* out) {
  if (type == CUDA_R_16BF) {
    *out = ElementType::kBf16;
    return true;
  }
  if (type == CUDA_R_32F) {
    *out = ElementType::kF32;
    return true;
  }
  return false;
}

cublasStatus_t CheckLayout(const LayoutState& l, const char* name, std::string* why) {
  if (l.order != CUBLASLT_ORDER_COL) {
    *why = absl::StrCat("matrix ", name, " has order ", l.order, " (only column-major)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (l.plane_offset != 0 || l.batch_mode != CUBLASLT_BATCH_MODE_STRIDED) {
    *why = absl::StrCat("matrix ", name, " has plane offset ", l.plane_offset, " and batch mode ",
                        l.batch_mode, " (only strided batches without planes)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (l.batch_count < 1) {
    *why = absl::StrCat("matrix ", name, " has batch count ", l.batch_count);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (l.batch_count > 1 && l.batch_stride < 0) {
    *why =
        absl::StrCat("matrix ", name, " has batch stride ", l.batch_stride, " (only strides >= 0)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (l.rows < 1 || l.cols < 1 || l.rows > INT32_MAX || l.cols > INT32_MAX) {
    *why = absl::StrCat("matrix ", name, " is ", l.rows, " x ", l.cols);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (l.ld < static_cast<int64_t>(l.rows)) {
    *why = absl::StrCat("matrix ", name, " has ld ", l.ld, " < rows ", l.rows);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// Whether the batches of `l` (checked by CheckLayout) share no element: one after
// another (stride >= one matrix's span), or interleaved within each column's ld (a
// column of batch b at b * stride, no two within `rows` of each other).
bool BatchesApart(const LayoutState& l) {
  if (l.batch_count <= 1) return true;
  const auto rows = static_cast<int64_t>(l.rows);
  const int64_t span = (static_cast<int64_t>(l.cols) - 1) * l.ld + rows;
  if (l.batch_stride >= span) return true;
  return l.batch_stride >= rows && (l.batch_count - 1) * l.batch_stride + rows <= l.ld;
}

}  // namespace

cublasStatus_t SetLayoutAttribute(LayoutState& s, cublasLtMatrixLayoutAttribute_t attr,
                                  const void* buf, size_t size) {
  return OnLayout(s, attr, Setter(buf, size));
}
cublasStatus_t GetLayoutAttribute(const LayoutState& s, cublasLtMatrixLayoutAttribute_t attr,
                                  void* buf, size_t size, size_t* written) {
  return OnLayout(s, attr, Getter(buf, size, written));
}
cublasStatus_t SetDescAttribute(DescState& s, cublasLtMatmulDescAttributes_t attr, const void* buf,
                                size_t size) {
  return OnDesc(s, attr, Setter(buf, size));
}
cublasStatus_t GetDescAttribute(const DescState& s, cublasLtMatmulDescAttributes_t attr, void* buf,
                                size_t size, size_t* written) {
  return OnDesc(s, attr, Getter(buf, size, written));
}
cublasStatus_t SetPrefAttribute(PrefState& s, cublasLtMatmulPreferenceAttributes_t attr,
                                const void* buf, size_t size) {
  return OnPref(s, attr, Setter(buf, size));
}
cublasStatus_t GetPrefAttribute(const PrefState& s, cublasLtMatmulPreferenceAttributes_t attr,
                                void* buf, size_t size, size_t* written) {
  return OnPref(s, attr, Getter(buf, size, written));
}
cublasStatus_t SetAlgoAttribute(AlgoState& s, cublasLtMatmulAlgoConfigAttributes_t attr,
                                const void* buf, size_t size) {
  // The identity of the algorithm is read only (as in cuBLASLt).
  if (attr == CUBLASLT_ALGO_CONFIG_ID || attr == CUBLASLT_ALGO_CONFIG_TILE_ID) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return OnAlgo(s, attr, Setter(buf, size));
}
cublasStatus_t GetAlgoAttribute(const AlgoState& s, cublasLtMatmulAlgoConfigAttributes_t attr,
                                void* buf, size_t size, size_t* written) {
  return OnAlgo(s, attr, Getter(buf, size, written));
}

size_t ElementBytes(ElementType type) { return type == ElementType::kBf16 ? 2 : 4; }

cublasStatus_t DescribeProblem(const DescState& desc, const LayoutState& a, const LayoutState& b,
                               const LayoutState& c, const LayoutState& d, Problem* problem,
                               std::string* why) {
  if (desc.compute_type != CUBLAS_COMPUTE_32F && desc.compute_type != CUBLAS_COMPUTE_32F_PEDANTIC) {
    *why = absl::StrCat("compute type ", desc.compute_type, " (only CUBLAS_COMPUTE_32F)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (desc.scale_type != CUDA_R_32F || desc.pointer_mode != CUBLASLT_POINTER_MODE_HOST) {
    *why = absl::StrCat("scale type ", desc.scale_type, " / pointer mode ", desc.pointer_mode,
                        " (only f32 scalars in host memory)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const auto op_ok = [](int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T; };
  if (!op_ok(desc.transa) || !op_ok(desc.transb) || desc.transc != CUBLAS_OP_N ||
      desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT || desc.fill_mode != CUBLAS_FILL_MODE_FULL) {
    *why = absl::StrCat("operations ", desc.transa, "/", desc.transb, "/", desc.transc,
                        ", epilogue ", desc.epilogue, ", fill mode ", desc.fill_mode,
                        " (only N or T on A and B, N on C, the default epilogue)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  ElementType ta, tb, tc, td;
  if (!IsElementType(a.type, &ta) || !IsElementType(b.type, &tb) || !IsElementType(c.type, &tc) ||
      !IsElementType(d.type, &td) || ta != tb || tc != td ||
      (ta == ElementType::kF32 && td != ElementType::kF32)) {
    *why = absl::StrCat("types A ", a.type, " B ", b.type, " C ", c.type, " D ", d.type,
                        " (only bf16 -> bf16, bf16 -> f32, f32 -> f32)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  for (const auto& [layout, name] : {std::pair{&a, "A"}, {&b, "B"}, {&c, "C"}, {&d, "D"}}) {
    if (cublasStatus_t s = CheckLayout(*layout, name, why); s != CUBLAS_STATUS_SUCCESS) return s;
  }
  Problem p;
  p.transa = desc.transa == CUBLAS_OP_T;
  p.transb = desc.transb == CUBLAS_OP_T;
  p.m = static_cast<int64_t>(p.transa ? a.cols : a.rows);
  p.k = static_cast<int64_t>(p.transa ? a.rows : a.cols);
  const int64_t kb = static_cast<int64_t>(p.transb ? b.cols : b.rows);
  p.n = static_cast<int64_t>(p.transb ? b.rows : b.cols);
  if (kb != p.k || static_cast<int64_t>(d.rows) != p.m || static_cast<int64_t>(d.cols) != p.n ||
      c.rows != d.rows || c.cols != d.cols) {
    *why = absl::StrCat("shapes do not chain: op(A) ", p.m, " x ", p.k, ", op(B) ", kb, " x ", p.n,
                        ", C ", c.rows, " x ", c.cols, ", D ", d.rows, " x ", d.cols);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (a.batch_count != d.batch_count || b.batch_count != d.batch_count ||
      c.batch_count != d.batch_count) {
    *why = absl::StrCat("batch counts differ: A ", a.batch_count, ", B ", b.batch_count, ", C ",
                        c.batch_count, ", D ", d.batch_count);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // D's matrices in a batch may not share an element (which product wrote it would
  // depend on the order they run in).
  if (!BatchesApart(d)) {
    *why = absl::StrCat("matrix D's ", d.batch_count, " batches overlap (stride ", d.batch_stride,
                        ", ", d.rows, " x ", d.cols, " with ld ", d.ld, ")");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  p.in = ta;
  p.out = td;
  p.lda = a.ld;
  p.ldb = b.ld;
  p.ldc = c.ld;
  p.ldd = d.ld;
  p.a_rows = static_cast<int64_t>(a.rows);
  p.a_cols = static_cast<int64_t>(a.cols);
  p.b_rows = static_cast<int64_t>(b.rows);
  p.b_cols = static_cast<int64_t>(b.cols);
  p.batch = d.batch_count;
  if (p.batch > 1) {
    p.stride_a = a.batch_stride;
    p.stride_b = b.batch_stride;
    p.stride_c = c.batch_stride;
    p.stride_d = d.batch_stride;
  }
  *problem = p;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace lockstep::cuda_cpu::cublaslt

#include "runtime/cuda/kernels/cublaslt_gemm.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/cuda/cuda_status.h"

namespace lockstep::cuda::kernels {
namespace {

// Heuristic candidates asked of cuBLASLt per key.
constexpr int kCandidates = 8;

absl::Status LtStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasLtGetStatusString(status)));
}

#define LOCKSTEP_RETURN_IF_LT(expr, what)                                     \
  do {                                                                        \
    if (absl::Status lt_status_ = LtStatus((expr), what); !lt_status_.ok()) { \
      return lt_status_;                                                      \
    }                                                                         \
  } while (false)

// The descriptors of one call: yᵀ (n x m) = op_T(w: k x n) · (xᵀ: k x m), column-major.
class MatmulDescs {
 public:
  ~MatmulDescs() {
    if (d_ != nullptr) cublasLtMatrixLayoutDestroy(d_);
    if (b_ != nullptr) cublasLtMatrixLayoutDestroy(b_);
    if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
  }

  // CUBLAS_COMPUTE_32F (not _FAST_TF32): f32 inputs are multiplied in full f32.
  absl::Status Init(int64_t m, int64_t n, int64_t k, cudaDataType_t in_type,
                    cudaDataType_t out_type) {
    LOCKSTEP_RETURN_IF_LT(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                          "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T;
    LOCKSTEP_RETURN_IF_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA,
                                                         &transpose, sizeof(transpose)),
                          "set TRANSA");
    LOCKSTEP_RETURN_IF_LT(cublasLtMatrixLayoutCreate(&a_, in_type, k, n, k), "layout of w");
    LOCKSTEP_RETURN_IF_LT(cublasLtMatrixLayoutCreate(&b_, in_type, k, m, k), "layout of x");
    LOCKSTEP_RETURN_IF_LT(cublasLtMatrixLayoutCreate(&d_, out_type, n, m, n), "layout of y");
    return absl::OkStatus();
  }

  cublasLtMatmulDesc_t op() const { return op_; }
  cublasLtMatrixLayout_t a() const { return a_; }
  cublasLtMatrixLayout_t b() const { return b_; }
  cublasLtMatrixLayout_t d() const { return d_; }

 private:
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr;
  cublasLtMatrixLayout_t b_ = nullptr;
  cublasLtMatrixLayout_t d_ = nullptr;
};

int32_t SplitK(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                           sizeof(splits), &written) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return splits;
}

cudaDataType_t InType(int io) { return io == 2 ? CUDA_R_32F : CUDA_R_16BF; }
cudaDataType_t OutType(int io) { return io == 0 ? CUDA_R_16BF : CUDA_R_32F; }
const char* IoName(int io) { return io == 0 ? "bf16" : io == 1 ? "bf16->f32" : "f32"; }

}  // namespace

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create(cudaStream_t stream,
                                                                   GemmOptions options) {
  if (options.heuristic_index < 0 || options.heuristic_index >= kCandidates) {
    return absl::InvalidArgumentError(absl::StrCat("heuristic_index ", options.heuristic_index,
                                                   " is not in [0, ", kCandidates, ")"));
  }
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm(stream, options));
  LOCKSTEP_RETURN_IF_LT(cublasLtCreate(&gemm->handle_), "cublasLtCreate");
  if (options.workspace_bytes > 0) {
    if (absl::Status s = CudaStatus(cudaMalloc(&gemm->workspace_, options.workspace_bytes),
                                    "allocating the GEMM workspace");
        !s.ok()) {
      return s;
    }
  }
  return gemm;
}

CublasLtGemm::~CublasLtGemm() {
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<cublasLtMatmulAlgo_t> CublasLtGemm::Algorithm(const GemmKey& key, Io io) {
  const int type = static_cast<int>(io);
  auto& cache = algorithms_[type];
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // Chosen for the bucket's largest M (or the reference M), never the first caller's M,
  // so the choice does not depend on call order.
  const int64_t query_m = options_.batch_invariant ? options_.invariant_reference_m : key.m_bucket;
  const int64_t n = key.n;
  const int64_t k = key.k;
  MatmulDescs descs;
  if (absl::Status s = descs.Init(query_m, n, k, InType(type), OutType(type)); !s.ok()) return s;
  cublasLtMatmulPreference_t pref = nullptr;
  LOCKSTEP_RETURN_IF_LT(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = options_.workspace_bytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  // Only algorithms that run on pointers aligned as this call's are (cuBLASLt assumes
  // 256 bytes otherwise); C is D.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align.d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align.d}};
  for (const auto& [attribute, bytes] : alignments) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes, sizeof(bytes));
    }
  }
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle_, descs.op(), descs.a(), descs.b(), descs.d(),
                                            descs.d(), pref, kCandidates, results, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  const std::string shape =
      absl::StrCat("m=", query_m, " n=", n, " k=", k, " (alignments ", key.align.a, "/",
                   key.align.b, "/", key.align.d, " bytes)");
  LOCKSTEP_RETURN_IF_LT(status, absl::StrCat("cublasLtMatmulAlgoGetHeuristic ", shape));
  if (found <= options_.heuristic_index) {
    return absl::NotFoundError(absl::StrCat("cuBLASLt has ", found, " ", IoName(type),
                                            " algorithms for ", shape, ", wanted candidate ",
                                            options_.heuristic_index));
  }
  cublasLtMatmulAlgo_t algo = results[options_.heuristic_index].algo;
  if (options_.batch_invariant) {
    // The chosen candidate or a later one without split-K; else split-K forced off.
    int pick = options_.heuristic_index;
    while (pick < found && SplitK(results[pick].algo) != 1) ++pick;
    if (pick < found) {
      algo = results[pick].algo;
    } else {
      const int32_t one = 1;
      const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
      LOCKSTEP_RETURN_IF_LT(cublasLtMatmulAlgoConfigSetAttribute(
                                &algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one)),
                            "set SPLITK_NUM");
      LOCKSTEP_RETURN_IF_LT(cublasLtMatmulAlgoConfigSetAttribute(
                                &algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, sizeof(none)),
                            "set REDUCTION_SCHEME");
    }
  }
  cache.emplace(key, algo);
  return algo;
}

absl::Status CublasLtGemm::Gemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k,
                                Bf16* y) {
  return Run(x, m, w, n, k, y, Io::kBf16);
}

absl::Status CublasLtGemm::Gemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k,
                                float* y) {
  return Run(x, m, w, n, k, y, Io::kBf16ToF32);
}

absl::Status CublasLtGemm::Gemm(const float* x, int64_t m, const float* w, int64_t n, int64_t k,
                                float* y) {
  return Run(x, m, w, n, k, y, Io::kF32);
}

absl::Status CublasLtGemm::Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k,
                               void* y, Io io) {
  if (m < 1 || n < 1 || k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM of m=", m, " n=", n, " k=", k));
  }
  absl::StatusOr<cublasLtMatmulAlgo_t> algo =
      Algorithm(MakeGemmKey(m, n, k, options_.batch_invariant, AlignmentsOf(w, x, y)), io);
  if (!algo.ok()) return algo.status();
  const int type = static_cast<int>(io);
  MatmulDescs descs;
  if (absl::Status s = descs.Init(m, n, k, InType(type), OutType(type)); !s.ok()) return s;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  LOCKSTEP_RETURN_IF_LT(
      cublasLtMatmul(handle_, descs.op(), &alpha, w, descs.a(), x, descs.b(), &beta, y, descs.d(),
                     y, descs.d(), &*algo, workspace_, options_.workspace_bytes, stream_),
      absl::StrCat("cublasLtMatmul ", IoName(type), " m=", m, " n=", n, " k=", k));
  return absl::OkStatus();
}

}  // namespace lockstep::cuda::kernels

#include "runtime/cuda/kernels/cublaslt_gemm.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/log.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels/gemm_invariance.h"

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

// `batch` with its zero lds made dense for n and k.
GemmBatch Resolved(GemmBatch batch, int64_t n, int64_t k) {
  if (batch.x_ld == 0) batch.x_ld = k;
  if (batch.w_ld == 0) batch.w_ld = batch.w_transposed ? k : n;
  if (batch.y_ld == 0) batch.y_ld = n;
  return batch;
}

}  // namespace

// The descriptors of one call: yᵀ (n x m) = op(w) · (xᵀ: k x m), column-major, with
// op(w) = (w: k x n)ᵀ for the linear-layer layout and w: n x k otherwise; per product
// of a strided batch.
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
                    cudaDataType_t out_type, const GemmBatch& layout) {
    const GemmBatch b = Resolved(layout, n, k);
    LOCKSTEP_RETURN_IF_LT(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                          "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = b.w_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    LOCKSTEP_RETURN_IF_LT(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA,
                                                         &transpose, sizeof(transpose)),
                          "set TRANSA");
    LOCKSTEP_RETURN_IF_LT(b.w_transposed ? cublasLtMatrixLayoutCreate(&a_, in_type, k, n, b.w_ld)
                                         : cublasLtMatrixLayoutCreate(&a_, in_type, n, k, b.w_ld),
                          "layout of w");
    LOCKSTEP_RETURN_IF_LT(cublasLtMatrixLayoutCreate(&b_, in_type, k, m, b.x_ld), "layout of x");
    LOCKSTEP_RETURN_IF_LT(cublasLtMatrixLayoutCreate(&d_, out_type, n, m, b.y_ld), "layout of y");
    if (b.count > 1) {
      const auto count = static_cast<int32_t>(b.count);
      const std::pair<cublasLtMatrixLayout_t, int64_t> strides[] = {
          {a_, b.w_stride}, {b_, b.x_stride}, {d_, b.y_stride}};
      for (const auto& [layout, stride] : strides) {
        LOCKSTEP_RETURN_IF_LT(
            cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                             sizeof(count)),
            "set BATCH_COUNT");
        LOCKSTEP_RETURN_IF_LT(
            cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof(stride)),
            "set STRIDED_BATCH_OFFSET");
      }
    }
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

namespace {

// Descriptor sets kept per wrapper (beyond: made per call, as before the cache).
constexpr size_t kMaxCachedDescs = 2048;

int32_t SplitK(const cublasLtMatmulAlgo_t& algo) {
  int32_t splits = 1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                           sizeof(splits), &written) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return splits;
}

// Sets split-K off (1 split, no reduction) on `algo`; false when cuBLASLt refuses.
bool ForceNoSplitK(cublasLtMatmulAlgo_t& algo) {
  const int32_t one = 1;
  const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
                                              sizeof(one)) == CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                              sizeof(none)) == CUBLAS_STATUS_SUCCESS &&
         SplitK(algo) == 1;
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

CublasLtGemm::CublasLtGemm(cudaStream_t stream, GemmOptions options)
    : stream_(stream), options_(std::move(options)) {}

CublasLtGemm::~CublasLtGemm() {
  descs_.clear();
  if (probe_stream_ != nullptr) cudaStreamDestroy(probe_stream_);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<const MatmulDescs*> CublasLtGemm::Descs(Io io, int64_t m, int64_t n, int64_t k,
                                                       const GemmBatch& batch,
                                                       std::unique_ptr<MatmulDescs>& spare) {
  const int type = static_cast<int>(io);
  const auto key = std::make_tuple(type, m, n, k, batch);
  if (auto it = descs_.find(key); it != descs_.end()) return it->second.get();
  auto descs = std::make_unique<MatmulDescs>();
  if (absl::Status s = descs->Init(m, n, k, InType(type), OutType(type), batch); !s.ok()) {
    return s;
  }
  if (descs_.size() >= kMaxCachedDescs) {
    spare = std::move(descs);
    return spare.get();
  }
  return descs_.emplace(key, std::move(descs)).first->second.get();
}

absl::StatusOr<bool> CublasLtGemm::Invariant(const cublasLtMatmulAlgo_t& algo, int64_t n, int64_t k,
                                             Io io, const void* w, const GemmBatch& layout) {
  const int type = static_cast<int>(io);
  const int64_t big = std::max<int64_t>(options_.invariant_check_m, 2);
  const size_t in_bytes = io == Io::kF32 ? 4 : 2;
  const size_t out_bytes = io == Io::kBf16 ? 2 : 4;
  const GemmBatch lay = Resolved(layout, n, k);
  const std::string what =
      absl::StrCat("the batch-invariance check of m=1 vs m=", big, " n=", n, " k=", k, " ",
                   IoName(type), lay.count > 1 ? absl::StrCat(" (", lay.count, " products)") : "");
  if (probe_stream_ == nullptr) {
    if (absl::Status s =
            CudaStatus(cudaStreamCreateWithFlags(&probe_stream_, cudaStreamNonBlocking), what);
        !s.ok()) {
      return s;
    }
  }
  // Probe rows: fixed-seed values in [-1, 1) (bf16 or f32), on a stream of their own,
  // with stream-ordered memory (no device-wide synchronization).
  // Elements from the first to past the last of `big` rows of every product.
  const auto span = [&](int64_t ld, int64_t stride, int64_t row) {
    return static_cast<size_t>((lay.count - 1) * stride + (big - 1) * ld + row);
  };
  std::vector<uint8_t> host(span(lay.x_ld, lay.x_stride, k) * in_bytes);
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (size_t i = 0; i < host.size() / in_bytes; ++i) {
    const float v = value(rng);
    if (in_bytes == 4) {
      std::memcpy(host.data() + 4 * i, &v, 4);
    } else {
      const Bf16 b = FloatToBf16(v);
      std::memcpy(host.data() + 2 * i, &b, 2);
    }
  }
  void* x = nullptr;
  void* y_big = nullptr;
  void* y_one = nullptr;
  void* workspace = nullptr;
  const size_t y_bytes = span(lay.y_ld, lay.y_stride, n) * out_bytes;
  absl::Status s = CudaStatus(cudaMallocAsync(&x, host.size(), probe_stream_), what);
  if (s.ok()) s = CudaStatus(cudaMallocAsync(&y_big, y_bytes, probe_stream_), what);
  if (s.ok()) s = CudaStatus(cudaMallocAsync(&y_one, y_bytes, probe_stream_), what);
  if (s.ok() && options_.workspace_bytes > 0) {
    s = CudaStatus(cudaMallocAsync(&workspace, options_.workspace_bytes, probe_stream_), what);
  }
  if (s.ok()) {
    s = CudaStatus(
        cudaMemcpyAsync(x, host.data(), host.size(), cudaMemcpyHostToDevice, probe_stream_), what);
  }
  std::vector<uint8_t> row_big(y_bytes), row_one(y_bytes);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const std::pair<int64_t, void*> runs[] = {{big, y_big}, {1, y_one}};
  for (const auto& [m, y] : runs) {
    if (!s.ok()) break;
    MatmulDescs descs;
    s = descs.Init(m, n, k, InType(type), OutType(type), lay);
    if (s.ok()) {
      s = LtStatus(cublasLtMatmul(handle_, descs.op(), &alpha, w, descs.a(), x, descs.b(), &beta, y,
                                  descs.d(), y, descs.d(), &algo, workspace,
                                  options_.workspace_bytes, probe_stream_),
                   what);
    }
  }
  if (s.ok()) {
    s = CudaStatus(
        cudaMemcpyAsync(row_big.data(), y_big, y_bytes, cudaMemcpyDeviceToHost, probe_stream_),
        what);
  }
  if (s.ok()) {
    s = CudaStatus(
        cudaMemcpyAsync(row_one.data(), y_one, y_bytes, cudaMemcpyDeviceToHost, probe_stream_),
        what);
  }
  for (void* p : {x, y_big, y_one, workspace}) {
    if (p != nullptr) cudaFreeAsync(p, probe_stream_);
  }
  const absl::Status synced = CudaStatus(cudaStreamSynchronize(probe_stream_), what);
  if (!s.ok()) return s;
  if (!synced.ok()) return synced;
  // Row 0 of every product (the rest of y_one was never written).
  for (int64_t product = 0; product < lay.count; ++product) {
    const size_t at = static_cast<size_t>(product * lay.y_stride) * out_bytes;
    if (std::memcmp(row_big.data() + at, row_one.data() + at, n * out_bytes) != 0) return false;
  }
  return true;
}

absl::StatusOr<cublasLtMatmulAlgo_t> CublasLtGemm::Algorithm(const GemmKey& key, Io io,
                                                             const void* w) {
  const int type = static_cast<int>(io);
  auto& cache = algorithms_[type];
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // Chosen for the bucket's largest M (or the reference M), never the first caller's M,
  // so the choice does not depend on call order.
  const int64_t query_m = options_.batch_invariant ? options_.invariant_reference_m : key.m_bucket;
  const int64_t n = key.n;
  const int64_t k = key.k;
  MatmulDescs descs;
  if (absl::Status s = descs.Init(query_m, n, k, InType(type), OutType(type), key.batch); !s.ok()) {
    return s;
  }
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  // The heuristic's candidates; with `reduction_none`, only algorithms without a split-K
  // or stream-K reduction, whose reduction order could depend on M.
  const auto query = [&](bool reduction_none) {
    found = 0;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasStatus_t status = cublasLtMatmulPreferenceCreate(&pref);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
    const uint64_t workspace = options_.workspace_bytes;
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &workspace, sizeof(workspace));
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
    if (reduction_none && status == CUBLAS_STATUS_SUCCESS) {
      const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
      status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof(none));
    }
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle_, descs.op(), descs.a(), descs.b(), descs.d(),
                                              descs.d(), pref, kCandidates, results, &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    return status;
  };
  cublasStatus_t status = query(options_.batch_invariant);
  if (options_.batch_invariant &&
      (status != CUBLAS_STATUS_SUCCESS || found <= options_.heuristic_index)) {
    // None without a reduction: any candidate, with split-K forced off below.
    status = query(false);
  }
  const std::string shape = absl::StrCat(
      "m=", query_m, " n=", n, " k=", k, " (alignments ", key.align.a, "/", key.align.b, "/",
      key.align.d, " bytes",
      key.batch.count > 1 ? absl::StrCat(", ", key.batch.count, " products") : "", ")");
  LOCKSTEP_RETURN_IF_LT(status, absl::StrCat("cublasLtMatmulAlgoGetHeuristic ", shape));
  if (found <= options_.heuristic_index) {
    return absl::NotFoundError(absl::StrCat("cuBLASLt has ", found, " ", IoName(type),
                                            " algorithms for ", shape, ", wanted candidate ",
                                            options_.heuristic_index));
  }
  cublasLtMatmulAlgo_t algo = results[options_.heuristic_index].algo;
  if (options_.batch_invariant) {
    // The wanted candidate or the next one with split-K 1 that the check at first use
    // finds invariant (gemm_invariance.h).
    std::vector<std::string> refused;
    absl::StatusOr<int> pick = FirstInvariantCandidate(
        options_.heuristic_index, found,
        [&](int i) { return SplitK(results[i].algo) == 1 || ForceNoSplitK(results[i].algo); },
        [&](int i) -> absl::StatusOr<bool> {
          if (options_.invariance_check_for_test) return options_.invariance_check_for_test(i);
          return Invariant(results[i].algo, n, k, io, w, key.batch);
        },
        &refused);
    if (!pick.ok()) {
      return absl::Status(
          pick.status().code(),
          absl::StrCat("batch-invariant ", IoName(type), " GEMM ", shape, ": ",
                       pick.status().message(), " (", absl::StrJoin(refused, "; "), ")"));
    }
    for (const std::string& line : refused) {
      if (line.find("split-K") == std::string::npos) ++invariance_fallbacks_;
    }
    if (!refused.empty()) {
      LOCKSTEP_LOG_WARN("cuda", "batch-invariant {} GEMM {}: candidate {} ({})", IoName(type),
                        shape, *pick, absl::StrJoin(refused, "; "));
    }
    algo = results[*pick].algo;
  }
  cache.emplace(key, algo);
  return algo;
}

absl::Status CublasLtGemm::Gemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k,
                                Bf16* y) {
  return Run(x, m, w, n, k, y, Io::kBf16, {});
}

absl::Status CublasLtGemm::Gemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k,
                                float* y) {
  return Run(x, m, w, n, k, y, Io::kBf16ToF32, {});
}

absl::Status CublasLtGemm::Gemm(const float* x, int64_t m, const float* w, int64_t n, int64_t k,
                                float* y) {
  return Run(x, m, w, n, k, y, Io::kF32, {});
}

absl::Status CublasLtGemm::BatchedGemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n,
                                       int64_t k, Bf16* y, const GemmBatch& batch) {
  return Run(x, m, w, n, k, y, Io::kBf16, batch);
}

absl::Status CublasLtGemm::BatchedGemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n,
                                       int64_t k, float* y, const GemmBatch& batch) {
  return Run(x, m, w, n, k, y, Io::kBf16ToF32, batch);
}

absl::Status CublasLtGemm::BatchedGemm(const float* x, int64_t m, const float* w, int64_t n,
                                       int64_t k, float* y, const GemmBatch& batch) {
  return Run(x, m, w, n, k, y, Io::kF32, batch);
}

absl::Status CublasLtGemm::Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k,
                               void* y, Io io, const GemmBatch& batch) {
  if (m < 1 || n < 1 || k < 1 || batch.count < 1 || batch.count > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMM of m=", m, " n=", n, " k=", k, " in ", batch.count, " products"));
  }
  const GemmBatch b = Resolved(batch, n, k);
  if (b.x_ld < k || b.y_ld < n || b.w_ld < (b.w_transposed ? k : n) ||
      (b.count > 1 && (b.x_stride < 0 || b.w_stride < 0 || b.y_stride < 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GEMM of m=", m, " n=", n, " k=", k, ": layout x ld ", b.x_ld, " stride ", b.x_stride,
        ", w ld ", b.w_ld, " stride ", b.w_stride, ", y ld ", b.y_ld, " stride ", b.y_stride));
  }
  // A batch's later products start a stride past the first: each operand is aligned as
  // its pointer and its stride both are.
  GemmAlignments align = AlignmentsOf(w, x, y);
  if (b.count > 1) {
    const int64_t in_bytes = io == Io::kF32 ? 4 : 2;
    const int64_t out_bytes = io == Io::kBf16 ? 2 : 4;
    const auto with_stride = [](uint32_t alignment, int64_t stride_bytes) {
      return std::min(alignment, AddressAlignment(static_cast<uintptr_t>(stride_bytes)));
    };
    align.a = with_stride(align.a, b.w_stride * in_bytes);
    align.b = with_stride(align.b, b.x_stride * in_bytes);
    align.d = with_stride(align.d, b.y_stride * out_bytes);
  }
  absl::StatusOr<cublasLtMatmulAlgo_t> algo =
      Algorithm(MakeGemmKey(m, n, k, options_.batch_invariant, align, batch), io, w);
  if (!algo.ok()) return algo.status();
  const int type = static_cast<int>(io);
  std::unique_ptr<MatmulDescs> spare;
  absl::StatusOr<const MatmulDescs*> descs = Descs(io, m, n, k, batch, spare);
  if (!descs.ok()) return descs.status();
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const MatmulDescs& d = **descs;
  LOCKSTEP_RETURN_IF_LT(
      cublasLtMatmul(handle_, d.op(), &alpha, w, d.a(), x, d.b(), &beta, y, d.d(), y, d.d(), &*algo,
                     workspace_, options_.workspace_bytes, stream_),
      absl::StrCat("cublasLtMatmul ", IoName(type), " m=", m, " n=", n, " k=", k,
                   batch.count > 1 ? absl::StrCat(" (", batch.count, " products)") : ""));
  return absl::OkStatus();
}

}  // namespace lockstep::cuda::kernels

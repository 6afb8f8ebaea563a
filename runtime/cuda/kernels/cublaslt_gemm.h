// bf16 GEMM through cuBLASLt: y[m, n] = x[m, k] · wᵀ with w [n, k] row-major (the
// linear-layer layout of runtime/engine/cpu/gemm.h), bf16 in, bf16 (or f32) out, fp32 compute;
// and the same in f32 throughout (the engine's f32 mode).
// Row-major is the transposed column-major call: yᵀ (n x m) = w (as k x n, transposed) · xᵀ.
//
// One object per stream: it owns the cuBLASLt handle and workspace of that stream and
// caches the chosen algorithm per (M bucket, N, K, operand alignments, layout: dense or a
// strided batch) (gemm_key.h): the
// heuristic query states each pointer's actual alignment, so offset pointers (a
// per-expert GEMM's rows) get an algorithm that runs on them. It also caches the matmul
// descriptors per (types, M, N, K) (creating them costs 5-10 us of host time a call).
// In batch-invariant mode every M uses the one algorithm of its (N, K) and alignments,
// asked for with the reduction scheme "none" (no split-K or stream-K reduction), so a
// row's result does not depend on how many rows share the GEMM (the engine's
// activations are at fixed, 256-byte aligned scratch offsets, so their alignment never
// changes with the batch). That is verified at the key's first use, on probe data on a
// stream of its own: row 0 at M = 1 must have the bits it has at M =
// invariant_check_m; a candidate that fails is passed over for the next (logged), and
// no invariant candidate is an error (gemm_invariance.h). That first use must be eager
// (the engine warms every shape up before capturing graphs).
//
//   absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm = CublasLtGemm::Create(stream, {});
//   RETURN_IF_ERROR((*gemm)->Gemm(x, m, w, n, k, y));
//
// Thread-compatible (one engine thread per stream).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_CUBLASLT_GEMM_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_CUBLASLT_GEMM_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/gemm_key.h"

namespace lockstep::cuda::kernels {

struct GemmOptions {
  bool batch_invariant = false;
  size_t workspace_bytes = size_t{32} << 20;
  // Batch-invariant mode chooses each (N, K)'s algorithm for this M.
  int64_t invariant_reference_m = 128;
  // Which of cuBLASLt's heuristic candidates to use (0: its first choice; others let a
  // benchmark time the alternatives), in [0, 8). NotFound when there are fewer.
  int heuristic_index = 0;
  // Batch-invariant mode's check at first use compares M = 1 with this M (the largest
  // batch the engine runs through one GEMM).
  int64_t invariant_check_m = 512;
  // Tests only: replaces that check (given the candidate's index), e.g. to inject a
  // candidate that is not invariant.
  std::function<absl::StatusOr<bool>(int candidate)> invariance_check_for_test;
};

class MatmulDescs;

class CublasLtGemm {
 public:
  static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create(cudaStream_t stream,
                                                              GemmOptions options);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Enqueues y = x · wᵀ on the stream (device pointers, dense rows). InvalidArgument for
  // a size < 1; Internal with cuBLASLt's words when it fails.
  absl::Status Gemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k, Bf16* y);
  // The same with an f32 output (router and LM-head logits: routing and sampling read
  // them unrounded). Its algorithms are cached apart from the bf16 ones.
  absl::Status Gemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k, float* y);
  // f32 in and out with f32 compute (no TF32): the engine's f32 mode. Cached apart too.
  absl::Status Gemm(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y);

  // A strided batch (cuBLASLt's BATCH_COUNT and STRIDED_BATCH_OFFSET): for b < batch.count,
  // y_b [m, n] = x_b [m, k] · w_b (transposed or not, gemm_key.h's GemmBatch), one call
  // for every product (MLA's per-head projections). Its algorithms and descriptors are
  // cached per layout; batch-invariant mode checks row 0 of every product. InvalidArgument
  // for a size < 1, an ld below its rows' length or a negative stride.
  absl::Status BatchedGemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k, Bf16* y,
                           const GemmBatch& batch);
  absl::Status BatchedGemm(const Bf16* x, int64_t m, const Bf16* w, int64_t n, int64_t k, float* y,
                           const GemmBatch& batch);
  absl::Status BatchedGemm(const float* x, int64_t m, const float* w, int64_t n, int64_t k,
                           float* y, const GemmBatch& batch);

  size_t cached_algorithms() const {
    size_t n = 0;
    for (const auto& cache : algorithms_) n += cache.size();
    return n;
  }
  size_t cached_descriptors() const { return descs_.size(); }
  // Batch-invariant candidates passed over because the check found them not invariant.
  int invariance_fallbacks() const { return invariance_fallbacks_; }
  const GemmOptions& options() const { return options_; }

 private:
  CublasLtGemm(cudaStream_t stream, GemmOptions options);  // out of line: MatmulDescs

  // The element types of one call.
  enum class Io { kBf16, kBf16ToF32, kF32, kCount };

  absl::Status Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k, void* y, Io io,
                   const GemmBatch& batch);
  // The cached algorithm of `key` for the element types (chosen on first use; `w` is the
  // call's weight, which the batch-invariant check multiplies by probe rows).
  absl::StatusOr<cublasLtMatmulAlgo_t> Algorithm(const GemmKey& key, Io io, const void* w);
  // Whether `algo` gives row 0 of every product the same bits at M = 1 as at
  // M = invariant_check_m.
  absl::StatusOr<bool> Invariant(const cublasLtMatmulAlgo_t& algo, int64_t n, int64_t k, Io io,
                                 const void* w, const GemmBatch& batch);
  // The cached descriptors of (io, m, n, k, batch), made on first use (a temporary in
  // `spare` once the cache holds kMaxCachedDescs).
  absl::StatusOr<const MatmulDescs*> Descs(Io io, int64_t m, int64_t n, int64_t k,
                                           const GemmBatch& batch,
                                           std::unique_ptr<MatmulDescs>& spare);

  cudaStream_t stream_;
  GemmOptions options_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  absl::flat_hash_map<GemmKey, cublasLtMatmulAlgo_t> algorithms_[static_cast<int>(Io::kCount)];
  absl::flat_hash_map<std::tuple<int, int64_t, int64_t, int64_t, GemmBatch>,
                      std::unique_ptr<MatmulDescs>>
      descs_;
  cudaStream_t probe_stream_ = nullptr;  // the batch-invariant check's, made on first use
  int invariance_fallbacks_ = 0;
};

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_CUBLASLT_GEMM_H_

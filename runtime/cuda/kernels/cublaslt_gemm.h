// bf16 GEMM through cuBLASLt: y[m, n] = x[m, k] · wᵀ with w [n, k] row-major (the
// linear-layer layout of runtime/engine/gemm.h), bf16 in, bf16 (or f32) out, fp32 compute;
// and the same in f32 throughout (the engine's f32 mode).
// Row-major is the transposed column-major call: yᵀ (n x m) = w (as k x n, transposed) · xᵀ.
//
// One object per stream: it owns the cuBLASLt handle and workspace of that stream and
// caches the chosen algorithm per (M bucket, N, K, operand alignments) (gemm_key.h): the
// heuristic query states each pointer's actual alignment, so offset pointers (a
// per-expert GEMM's rows) get an algorithm that runs on them. In batch-invariant mode
// every M uses the one algorithm of its (N, K) and alignments, with split-K off, so a
// row's result does not depend on how many rows share the GEMM (the engine's
// activations are at fixed, 256-byte aligned scratch offsets, so their alignment never
// changes with the batch).
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
#include <memory>

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
};

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

  size_t cached_algorithms() const {
    size_t n = 0;
    for (const auto& cache : algorithms_) n += cache.size();
    return n;
  }
  const GemmOptions& options() const { return options_; }

 private:
  CublasLtGemm(cudaStream_t stream, GemmOptions options) : stream_(stream), options_(options) {}

  // The element types of one call.
  enum class Io { kBf16, kBf16ToF32, kF32, kCount };

  absl::Status Run(const void* x, int64_t m, const void* w, int64_t n, int64_t k, void* y, Io io);
  // The cached algorithm of `key` for the element types (chosen on first use).
  absl::StatusOr<cublasLtMatmulAlgo_t> Algorithm(const GemmKey& key, Io io);

  cudaStream_t stream_;
  GemmOptions options_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  absl::flat_hash_map<GemmKey, cublasLtMatmulAlgo_t> algorithms_[static_cast<int>(Io::kCount)];
};

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_CUBLASLT_GEMM_H_

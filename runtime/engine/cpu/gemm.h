// The batch-invariant matrix product of the engine: y[m, n] = x[m, k] · Wᵀ (+ bias),
// with W given as Hugging Face stores linear weights ([out = n, in = k]).
//
// Every output element is computed as the same chain of fused multiply-adds,
// acc = fma(x[i][0], w[j][0], +0); acc = fma(x[i][1], w[j][1], acc); ... in order
// over k, whatever m is, wherever row i sits in the batch, and however many threads
// run (threads split the output columns; no element is split). A sequence's logits are
// therefore bitwise identical whatever else shares its batch (OpenBLAS sgemm does not
// give this: its micro-kernels treat rows differently depending on M and on a row's
// position in a tile, see docs/perf.md "## engine"). The AVX2+FMA kernel and the
// portable one (std::fma) produce the same bits.
//
// PackedMatrix is immutable after Pack; Gemm may run concurrently on shared matrices.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_GEMM_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_GEMM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/engine/cpu/parallel.h"

namespace lockstep::engine {

// W [n, k] repacked into column panels of kPanel outputs: panel p holds, for each
// k', the weights of outputs p*kPanel .. p*kPanel+kPanel-1 (zero past n).
class PackedMatrix {
 public:
  static constexpr int kPanel = 16;

  PackedMatrix() = default;
  // `w` is row-major [n, k].
  static PackedMatrix Pack(absl::Span<const float> w, int n, int k);
  // A matrix from another's n(), k() and panels(), bit for bit (an expert copied
  // between ranks); InvalidArgument when the sizes do not fit together.
  static absl::StatusOr<PackedMatrix> FromPanels(int n, int k, std::vector<float> panels);

  int n() const { return n_; }
  int k() const { return k_; }
  int num_panels() const { return (n_ + kPanel - 1) / kPanel; }
  const float* panel(int p) const { return panels_.data() + static_cast<size_t>(p) * k_ * kPanel; }
  size_t bytes() const { return panels_.size() * sizeof(float); }
  absl::Span<const float> panels() const { return panels_; }

 private:
  int n_ = 0;
  int k_ = 0;
  std::vector<float> panels_;
};

// y (row stride ldy) = x (row stride ldx) · Wᵀ, plus `bias` (size n) when not null.
// `pool` may be null (single thread).
void Gemm(const float* x, int m, int ldx, const PackedMatrix& w, const float* bias, float* y,
          int ldy, ThreadPool* pool);

// True when the AVX2+FMA kernel is in use on this CPU.
bool GemmUsesAvx2();

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_GEMM_H_

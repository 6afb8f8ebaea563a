// The CPU execution layer's cublasLtMatmulAlgoGetHeuristic: synthetic algorithms for a
// matmul problem, in the order a GPU heuristic would plausibly rank them.
//
// Split-K is offered first when the output (all of a batch's products) has few
// 128 x 128 tiles for the 132 SMs of an H200 and k is long: splits S = 2, 4, .. 16 while
// tiles * S <= 132 and k / S >= 256, largest first, each needing S * m * n * 4 bytes of
// workspace (fp32 partials; a batch runs its products in turn over that one workspace)
// and the COMPUTE_TYPE reduction. Since n (the batch, in the engine's GEMMs) sets the
// tile count, whether and how far a GEMM is split depends on it. Then four algorithms
// without split-K (tiles 64x64, 128x64, 64x128, 128x128; small outputs first). Every
// algorithm requires the pointer alignments the preference states (256 bytes unless
// told), and none is offered beyond the preference's workspace or reduction mask.
//
// Pure function; thread-safe.
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_HEURISTIC_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_HEURISTIC_H_

#include <cstddef>
#include <vector>

#include "runtime/cuda/cpu/cublaslt_descriptors.h"

namespace lockstep::cuda_cpu::cublaslt {

inline constexpr int kSmCount = 132;
inline constexpr int kMaxSplits = 16;
// Algorithm ids (CUBLASLT_ALGO_CONFIG_ID).
inline constexpr int kPlainAlgoId = 0;
inline constexpr int kSplitKAlgoId = 1;
inline constexpr int kMDependentAlgoId = 2;  // injected only

struct Candidate {
  AlgoState algo;
  size_t workspace = 0;
  float waves = 0;
};

// Bytes of workspace `algo` needs for `problem` (its fp32 split-K partials).
size_t WorkspaceBytes(const AlgoState& algo, const Problem& problem);

// At most `max_count` candidates, best first (none when a stated alignment is below
// the element size of its operand).
std::vector<Candidate> Heuristic(const Problem& problem, const PrefState& pref, int max_count);

}  // namespace lockstep::cuda_cpu::cublaslt

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_CUBLASLT_HEURISTIC_H_

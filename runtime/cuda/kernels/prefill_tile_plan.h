// Prefill / chunk attention tile plan: each sequence's query rows of this step are cut
// into tiles of at most `tile_rows` rows; the prefill kernel runs one CTA column per
// tile (and one per query head), over keys [0, last row's position]. Spec verification
// (K+1 rows) is a chunk of K+1 rows.
//
// Pure host code.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_PREFILL_TILE_PLAN_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_PREFILL_TILE_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/cuda/kernels/attention_desc.h"

namespace lockstep::cuda::kernels {

// One sequence's chunk: packed-Q rows [row_begin, row_begin + num_rows) at positions
// first_position, first_position + 1, ... (the cached prefix is [0, first_position)).
struct PrefillChunk {
  int32_t seq = 0;
  int32_t row_begin = 0;
  int32_t num_rows = 0;
  int64_t first_position = 0;
};

// Tiles in chunk order, each chunk's rows in order, each of 1 to tile_rows rows.
// InvalidArgument for tile_rows outside [1, kMaxPrefillTileRows] (the prefill kernel's
// limit), a chunk without rows, a negative row or position, or a last position >= 2^31.
// The prefill kernel's tiles come only from here.
absl::StatusOr<std::vector<PrefillTileDesc>> PlanPrefillTiles(absl::Span<const PrefillChunk> chunks,
                                                              int tile_rows);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_PREFILL_TILE_PLAN_H_

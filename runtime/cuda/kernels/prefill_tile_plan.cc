#include "runtime/cuda/kernels/prefill_tile_plan.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::cuda::kernels {

absl::StatusOr<std::vector<PrefillTileDesc>> PlanPrefillTiles(absl::Span<const PrefillChunk> chunks,
                                                              int tile_rows) {
  if (tile_rows < 1 || tile_rows > kMaxPrefillTileRows) {
    // The kernel holds at most kMaxPrefillTileRows query rows per tile (and traps on
    // more): a bigger plan is refused here, before anything reaches the device.
    return absl::InvalidArgumentError(
        absl::StrCat("tile_rows must be in [1, ", kMaxPrefillTileRows, "], got ", tile_rows));
  }
  std::vector<PrefillTileDesc> tiles;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const PrefillChunk& chunk = chunks[c];
    if (chunk.num_rows < 1 || chunk.row_begin < 0 || chunk.seq < 0 || chunk.first_position < 0 ||
        chunk.first_position + chunk.num_rows - 1 > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, ": seq ", chunk.seq, " rows ",
                                                     chunk.row_begin, "+", chunk.num_rows,
                                                     " at position ", chunk.first_position));
    }
    for (int32_t first = 0; first < chunk.num_rows; first += tile_rows) {
      tiles.push_back({.seq = chunk.seq,
                       .row_begin = chunk.row_begin + first,
                       .num_rows = std::min(tile_rows, chunk.num_rows - first),
                       .first_position = static_cast<int32_t>(chunk.first_position + first)});
    }
  }
  return tiles;
}

}  // namespace lockstep::cuda::kernels

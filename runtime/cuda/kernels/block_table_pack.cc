#include "runtime/cuda/kernels/block_table_pack.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::cuda::kernels {

absl::StatusOr<PackedBlockTable> PackBlockTables(absl::Span<const absl::Span<const BlockId>> tables,
                                                 absl::Span<const int64_t> tokens,
                                                 int tokens_per_block, int32_t num_blocks,
                                                 int32_t min_stride) {
  if (tables.size() != tokens.size() || tokens_per_block < 1 || min_stride < 0) {
    return absl::InvalidArgumentError(absl::StrCat(tables.size(), " tables, ", tokens.size(),
                                                   " lengths, tokens_per_block ", tokens_per_block,
                                                   ", min_stride ", min_stride));
  }
  PackedBlockTable packed;
  packed.rows = static_cast<int32_t>(tables.size());
  packed.stride = min_stride;
  for (size_t s = 0; s < tables.size(); ++s) {
    const int64_t needed = (tokens[s] + tokens_per_block - 1) / tokens_per_block;
    if (tokens[s] < 0 || static_cast<int64_t>(tables[s].size()) < needed) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": ", tables[s].size(),
                                                     " blocks for ", tokens[s], " tokens"));
    }
    for (BlockId b : tables[s]) {
      if (b.value() < 0 || b.value() >= num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequence ", s, ": block ", b.value(), " of ", num_blocks));
      }
    }
    packed.stride = std::max(packed.stride, static_cast<int32_t>(tables[s].size()));
  }
  packed.table.assign(static_cast<size_t>(packed.rows) * packed.stride, kPadBlock);
  for (size_t s = 0; s < tables.size(); ++s) {
    int32_t* row = packed.table.data() + s * packed.stride;
    for (size_t i = 0; i < tables[s].size(); ++i) row[i] = tables[s][i].value();
  }
  return packed;
}

}  // namespace lockstep::cuda::kernels

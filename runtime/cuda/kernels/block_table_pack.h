// Packs the per-sequence block tables of a step into one dense row-major int32 table
// for the device (PagedKvDesc::block_table): row s holds sequence s's block ids, then
// kPadBlock up to the stride. The stride is the longest table, or `min_stride` when
// larger (a fixed stride lets captured graphs reuse one buffer).
//
// Pure host code.
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_BLOCK_TABLE_PACK_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_BLOCK_TABLE_PACK_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"

namespace lockstep::cuda::kernels {

inline constexpr int32_t kPadBlock = -1;

struct PackedBlockTable {
  std::vector<int32_t> table;  // rows * stride
  int32_t rows = 0;
  int32_t stride = 0;
};

// `tables[s]` of sequence s; `tokens[s]` the positions it must cover (its blocks must
// hold BlocksFor(tokens[s]) entries); every id in [0, num_blocks). InvalidArgument
// otherwise, or when the sizes differ.
absl::StatusOr<PackedBlockTable> PackBlockTables(absl::Span<const absl::Span<const BlockId>> tables,
                                                 absl::Span<const int64_t> tokens,
                                                 int tokens_per_block, int32_t num_blocks,
                                                 int32_t min_stride = 0);

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_BLOCK_TABLE_PACK_H_

#include "runtime/cuda/copy_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep::cuda {

absl::Status ChunkLimits::Validate() const {
  if (chunk_bytes == 0) return absl::InvalidArgumentError("chunk_bytes must be > 0");
  if (max_segment_bytes == 0) return absl::InvalidArgumentError("max_segment_bytes must be > 0");
  if (max_segments < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_segments must be >= 1, got ", max_segments));
  }
  return absl::OkStatus();
}

ChunkPlanner::ChunkPlanner(absl::Span<const kv::BlockSpan> spans, size_t block_bytes,
                           ChunkLimits limits)
    : spans_(spans), block_bytes_(block_bytes), limits_(limits) {}

bool ChunkPlanner::Next(CopySegment* segments, Chunk* chunk) {
  chunk->host_offset = host_offset_;
  chunk->bytes = 0;
  chunk->num_segments = 0;
  while (span_index_ < spans_.size() && chunk->num_segments < limits_.max_segments &&
         chunk->bytes < limits_.chunk_bytes) {
    const kv::BlockSpan& span = spans_[span_index_];
    if (span_done_ == span.length) {
      ++span_index_;
      span_done_ = 0;
      continue;
    }
    const size_t take = std::min(
        {span.length - span_done_, limits_.chunk_bytes - chunk->bytes, limits_.max_segment_bytes});
    segments[chunk->num_segments++] = CopySegment{
        .slab_offset =
            static_cast<size_t>(span.block.value()) * block_bytes_ + span.offset + span_done_,
        .staging_offset = chunk->bytes,
        .length = take,
    };
    chunk->bytes += take;
    span_done_ += take;
  }
  host_offset_ += chunk->bytes;
  return chunk->num_segments > 0;
}

}  // namespace lockstep::cuda

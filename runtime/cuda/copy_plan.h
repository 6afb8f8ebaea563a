// Cuts a copier call's block spans into staged chunks: each chunk is at most
// `chunk_bytes` of the host buffer (one bounce buffer's worth), made of at most
// `max_segments` segments of at most `max_segment_bytes` each (so a big span gives the
// kernel many CTAs' worth of work). Chunks cover the spans in order, back to back, so a
// chunk is one contiguous range of the caller's host buffer and its segments sit back to
// back in the bounce buffer. Pure host code; the device copier drives it.
//
//   ChunkPlanner planner(spans, layout.BlockBytes(), limits);
//   ChunkPlanner::Chunk chunk;
//   while (planner.Next(segments, &chunk)) { ...copy chunk.bytes at chunk.host_offset... }
//
// Thread-compatible; the spans must outlive the planner.
#ifndef LOCKSTEP_RUNTIME_CUDA_COPY_PLAN_H_
#define LOCKSTEP_RUNTIME_CUDA_COPY_PLAN_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kvcache/block_copier.h"
#include "runtime/cuda/copy_segment.h"

namespace lockstep::cuda {

struct ChunkLimits {
  size_t chunk_bytes = size_t{4} << 20;
  size_t max_segment_bytes = size_t{64} << 10;
  int max_segments = 4096;

  // InvalidArgument naming the limit when one is 0 or negative.
  absl::Status Validate() const;
};

class ChunkPlanner {
 public:
  struct Chunk {
    size_t host_offset = 0;  // where the chunk starts in the caller's host buffer
    size_t bytes = 0;        // its length there and in the bounce buffer
    int num_segments = 0;
  };

  // `spans` have been checked against the pool (BlockCopier::CopyOut/CopyIn do that);
  // `limits` are valid.
  ChunkPlanner(absl::Span<const kv::BlockSpan> spans, size_t block_bytes, ChunkLimits limits);

  // Writes the next chunk's segments to `segments` (room for limits.max_segments) and
  // describes it in `chunk`; false when every span has been planned.
  bool Next(CopySegment* segments, Chunk* chunk);

 private:
  const absl::Span<const kv::BlockSpan> spans_;
  const size_t block_bytes_;
  const ChunkLimits limits_;
  size_t span_index_ = 0;
  size_t span_done_ = 0;  // bytes of spans_[span_index_] already planned
  size_t host_offset_ = 0;
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_COPY_PLAN_H_

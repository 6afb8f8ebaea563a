#include "runtime/transfer/block_writer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/transfer/crc32c.h"

namespace lockstep::transfer {

using kv::PoolKind;

BlockWriter::BlockWriter(const kv::BlockRefs& blocks, int64_t num_tokens,
                         const KvDescriptor& descriptor, const KvCopiers& copiers) {
  for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
    if (kind == PoolKind::kDraft && blocks.draft_generation == 0) continue;
    const kv::BlockLayout& layout = *descriptor.pool(kind);
    pools_.push_back({kind, copiers.pool(kind),
                      kind == PoolKind::kTarget ? &blocks.blocks : &blocks.draft_blocks,
                      static_cast<int32_t>(layout.BlocksFor(num_tokens)), layout.BlockBytes()});
  }
}

absl::Status BlockWriter::Place(const ChunkHeader& header, size_t size, size_t num_crcs) {
  spans_.clear();
  placed_ = false;
  if (trailer_seen_) return absl::DataLossError("a chunk arrived after the trailer");
  if (pool_ == pools_.size()) {
    return absl::DataLossError("the stream carries more than the request's blocks");
  }
  const Pool& pool = pools_[pool_];
  const lockstep::v1::KvPool wire_pool =
      pool.kind == PoolKind::kTarget ? lockstep::v1::KV_POOL_TARGET : lockstep::v1::KV_POOL_DRAFT;
  if (header.pool != wire_pool || header.first_block != block_ ||
      header.block_offset != static_cast<int64_t>(offset_)) {
    return absl::DataLossError(
        absl::StrCat("chunk out of place: it starts at ", lockstep::v1::KvPool_Name(header.pool),
                     " block ", header.first_block, " byte ", header.block_offset, ", expected ",
                     kv::PoolKindName(pool.kind), " block ", block_, " byte ", offset_));
  }
  const size_t left_in_pool = static_cast<size_t>(pool.count - block_) * pool.block_bytes - offset_;
  if (size > left_in_pool) {
    return absl::DataLossError(absl::StrCat("a chunk of ", size, " bytes overruns the ",
                                            kv::PoolKindName(pool.kind), " blocks by ",
                                            size - left_in_pool));
  }
  int32_t block = block_;
  size_t offset = offset_;
  size_t completed = 0;
  for (size_t at = 0; at < size;) {
    const size_t take = std::min(pool.block_bytes - offset, size - at);
    spans_.push_back({(*pool.table)[block], offset, take});
    at += take;
    offset += take;
    if (offset == pool.block_bytes) {
      ++completed;
      ++block;
      offset = 0;
    }
  }
  if (completed != num_crcs) {
    spans_.clear();
    return absl::DataLossError(absl::StrCat("a chunk carries ", num_crcs, " checksums for ",
                                            completed, " completed blocks"));
  }
  placed_bytes_ = size;
  placed_ = true;
  return absl::OkStatus();
}

absl::Status BlockWriter::Write(absl::Span<const std::byte> payload,
                                absl::Span<const uint32_t> crcs) {
  if (!placed_ || payload.size() != placed_bytes_) {
    return absl::InternalError(absl::StrCat("a payload of ", payload.size(),
                                            " bytes written without a chunk placed for it"));
  }
  placed_ = false;
  const Pool& pool = pools_[pool_];
  // Checksums first: a block that fails its check is never written.
  uint32_t crc = crc_;
  size_t offset = offset_;
  size_t crc_index = 0;
  const std::byte* data = payload.data();
  for (size_t i = 0; i < spans_.size(); ++i) {
    const kv::BlockSpan& span = spans_[i];
    crc = Crc32cExtend(crc, data, span.length);
    data += span.length;
    offset += span.length;
    if (offset < pool.block_bytes) continue;
    const uint32_t sent = crcs[crc_index++];
    if (crc != sent) {
      return absl::DataLossError(absl::StrFormat(
          "KV block %d of the %s pool (local block %d) failed its checksum: sent %08x, "
          "received bytes give %08x",
          block_ + static_cast<int32_t>(crc_index) - 1, kv::PoolKindName(pool.kind),
          span.block.value(), sent, crc));
    }
    crc = 0;
    offset = 0;
  }
  const absl::Status copied = pool.copier->CopyIn(payload, spans_);
  if (!copied.ok()) return copied;
  bytes_ += static_cast<int64_t>(payload.size());
  block_ += static_cast<int32_t>(crc_index);
  offset_ = offset;
  crc_ = crc;
  if (block_ == pool.count) {
    ++pool_;
    block_ = 0;
  }
  return absl::OkStatus();
}

absl::Status BlockWriter::ApplyTrailer(const lockstep::v1::PullTrailer& t) {
  const int32_t target = pools_[0].count;
  const int32_t draft = pools_.size() > 1 ? pools_[1].count : 0;
  if (trailer_seen_ || pool_ != pools_.size() || t.target_blocks() != target ||
      t.draft_blocks() != draft || t.payload_bytes() != bytes_) {
    return absl::DataLossError(
        absl::StrCat("the trailer (", t.target_blocks(), " target blocks, ", t.draft_blocks(),
                     " draft blocks, ", t.payload_bytes(), " bytes) does not match what arrived (",
                     bytes_, " bytes; expected ", target, " target and ", draft, " draft blocks)"));
  }
  trailer_seen_ = true;
  return absl::OkStatus();
}

absl::Status BlockWriter::Finish() const {
  if (!trailer_seen_) return absl::DataLossError("the stream ended without its trailer");
  return absl::OkStatus();
}

}  // namespace lockstep::transfer

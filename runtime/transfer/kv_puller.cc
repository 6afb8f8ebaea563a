#include "runtime/transfer/kv_puller.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/transfer/chunk_codec.h"
#include "runtime/transfer/crc32c.h"
#include "runtime/transfer/stream_copy.h"

namespace lockstep::transfer {
namespace {

using kv::PoolKind;

// Writes a pull's chunks into the local blocks, in stream order: the target blocks,
// then the draft blocks, each in table order.
class BlockWriter {
 public:
  BlockWriter(const LocalBlocks& blocks, const KvDescriptor& descriptor, const KvSlabs& slabs) {
    for (PoolKind kind : {PoolKind::kTarget, PoolKind::kDraft}) {
      if (kind == PoolKind::kDraft && blocks.draft_generation == 0) continue;
      const kv::BlockLayout& layout = *descriptor.pool(kind);
      pools_.push_back({kind, &layout, &slabs.pool(kind),
                        kind == PoolKind::kTarget ? &blocks.target_blocks : &blocks.draft_blocks,
                        static_cast<int32_t>(layout.BlocksFor(blocks.num_tokens)),
                        layout.BlockBytes()});
    }
  }

  absl::Status Apply(const DecodedChunk& chunk) {
    if (trailer_seen_) return absl::DataLossError("a chunk arrived after the trailer");
    if (chunk.trailer.has_value()) return ApplyTrailer(chunk);
    if (pool_ == pools_.size()) {
      return absl::DataLossError("the stream carries more than the request's blocks");
    }
    const Pool& pool = pools_[pool_];
    const lockstep::v1::KvPool wire_pool =
        pool.kind == PoolKind::kTarget ? lockstep::v1::KV_POOL_TARGET : lockstep::v1::KV_POOL_DRAFT;
    if (chunk.header.pool != wire_pool || chunk.header.first_block != block_ ||
        chunk.header.block_offset != static_cast<int64_t>(offset_)) {
      return absl::DataLossError(absl::StrCat(
          "chunk out of place: it starts at ", lockstep::v1::KvPool_Name(chunk.header.pool),
          " block ", chunk.header.first_block, " byte ", chunk.header.block_offset, ", expected ",
          kv::PoolKindName(pool.kind), " block ", block_, " byte ", offset_));
    }
    const PayloadView& payload = chunk.payload;
    const size_t left_in_pool =
        static_cast<size_t>(pool.count - block_) * pool.block_bytes - offset_;
    if (payload.size() > left_in_pool) {
      return absl::DataLossError(absl::StrCat("a chunk of ", payload.size(), " bytes overruns the ",
                                              kv::PoolKindName(pool.kind), " blocks by ",
                                              payload.size() - left_in_pool));
    }
    size_t crc_index = 0;
    for (size_t at = 0; at < payload.size();) {
      const size_t take = std::min(pool.block_bytes - offset_, payload.size() - at);
      payload.ForEachRun(
          at, take, [&](const uint8_t* data, size_t n) { crc_ = Crc32cExtend(crc_, data, n); });
      const BlockId local = (*pool.table)[block_];
      if (offset_ + take == pool.block_bytes) {
        if (crc_index == chunk.block_crc32c.size()) {
          return absl::DataLossError(
              absl::StrCat("no checksum for ", kv::PoolKindName(pool.kind), " block ", block_));
        }
        const uint32_t sent = chunk.block_crc32c[crc_index++];
        if (crc_ != sent) {
          return absl::DataLossError(absl::StrFormat(
              "KV block %d of the %s pool (local block %d) failed its checksum: sent %08x, "
              "received bytes give %08x",
              block_, kv::PoolKindName(pool.kind), local.value(), sent, crc_));
        }
      }
      uint8_t* dest = BlockData(*pool.slab, *pool.layout, local) + offset_;
      payload.ForEachRun(at, take, [&](const uint8_t* data, size_t n) {
        StreamCopy(dest, data, n);
        dest += n;
      });
      at += take;
      offset_ += take;
      if (offset_ == pool.block_bytes) {
        offset_ = 0;
        crc_ = 0;
        ++block_;
      }
    }
    if (crc_index != chunk.block_crc32c.size()) {
      return absl::DataLossError(absl::StrCat("a chunk carries ", chunk.block_crc32c.size(),
                                              " checksums for ", crc_index, " completed blocks"));
    }
    bytes_ += static_cast<int64_t>(payload.size());
    if (block_ == pool.count) {
      ++pool_;
      block_ = 0;
    }
    return absl::OkStatus();
  }

  // After the stream ended without error.
  absl::Status Finish() const {
    if (!trailer_seen_) return absl::DataLossError("the stream ended without its trailer");
    return absl::OkStatus();
  }

 private:
  struct Pool {
    PoolKind kind;
    const kv::BlockLayout* layout;
    const PoolSlab* slab;
    const std::vector<BlockId>* table;
    int32_t count;  // blocks that move
    size_t block_bytes;
  };

  absl::Status ApplyTrailer(const DecodedChunk& chunk) {
    const lockstep::v1::PullTrailer& t = *chunk.trailer;
    const int32_t target = pools_[0].count;
    const int32_t draft = pools_.size() > 1 ? pools_[1].count : 0;
    if (chunk.payload.size() != 0 || pool_ != pools_.size() || t.target_blocks() != target ||
        t.draft_blocks() != draft || t.payload_bytes() != bytes_) {
      return absl::DataLossError(absl::StrCat(
          "the trailer (", t.target_blocks(), " target blocks, ", t.draft_blocks(),
          " draft blocks, ", t.payload_bytes(), " bytes) does not match what arrived (", bytes_,
          " bytes; expected ", target, " target and ", draft, " draft blocks)"));
    }
    trailer_seen_ = true;
    return absl::OkStatus();
  }

  std::vector<Pool> pools_;
  size_t pool_ = 0;    // the pool being written
  int32_t block_ = 0;  // the block being written (table index)
  size_t offset_ = 0;  // bytes of it written
  uint32_t crc_ = 0;   // CRC32C of those bytes
  int64_t bytes_ = 0;  // payload bytes written in all
  bool trailer_seen_ = false;
};

absl::Status Prefixed(absl::StatusCode code, const ContextHandle& source,
                      absl::string_view message) {
  return absl::Status(code, absl::StrCat("pull of request ", source.request_id.value(), " from ",
                                         source.address, ": ", message));
}

}  // namespace

void PullControl::Attach(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  context_ = context;
  if (cancelled_) context_->TryCancel();
}

void PullControl::Detach() {
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
}

void PullControl::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (context_ != nullptr) context_->TryCancel();
}

bool PullControl::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

KvPuller::KvPuller(KvDescriptor descriptor, KvSlabs slabs, std::string requester,
                   TransferHooks hooks)
    : descriptor_(std::move(descriptor)),
      slabs_(slabs),
      requester_(std::move(requester)),
      hooks_(std::move(hooks)) {}

absl::Status KvPuller::Pull(RawPullStub& stub, const LocalBlocks& blocks,
                            const ContextHandle& source, absl::Time deadline,
                            PullControl& control) const {
  lockstep::v1::PullRequest request;
  request.set_context_request_id(source.request_id.value());
  request.set_requester(requester_);
  request.set_requester_request_id(blocks.id.value());
  ToProto(descriptor_, request.mutable_kv());
  request.set_num_tokens(blocks.num_tokens);
  request.set_target_blocks(static_cast<int32_t>(blocks.target_blocks.size()));
  request.set_draft_blocks(
      blocks.draft_generation == 0 ? 0 : static_cast<int32_t>(blocks.draft_blocks.size()));

  // Streaming stores must be ordered before the event that reports this pull (whatever
  // its outcome: the blocks may be reused at once).
  struct FenceOnReturn {
    ~FenceOnReturn() { StreamCopyFence(); }
  } fence;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  BlockWriter writer(blocks, descriptor_, slabs_);
  absl::Status local;  // a failure found here (malformed stream, checksum)
  control.Attach(&context);
  {
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader = stub.Pull(&context, request);
    grpc::ByteBuffer message;
    for (int64_t index = 0; reader->Read(&message); ++index) {
      if (control.cancelled()) break;  // no block is written after a cancel
      absl::StatusOr<DecodedChunk> chunk = DecodeChunk(message);
      local = chunk.ok() ? writer.Apply(*chunk) : chunk.status();
      if (!local.ok()) {
        context.TryCancel();
        break;
      }
      if (hooks_.after_receive_chunk) hooks_.after_receive_chunk(blocks.id, index);
    }
    const grpc::Status finished = reader->Finish();
    control.Detach();
    if (control.cancelled()) {
      return absl::CancelledError(
          absl::StrCat("KV receive of request ", blocks.id.value(), " cancelled"));
    }
    if (!local.ok()) return Prefixed(local.code(), source, local.message());
    if (finished.error_code() == grpc::StatusCode::CANCELLED) {
      // Not by us: the context rank aborted the stream.
      return Prefixed(
          absl::StatusCode::kUnavailable, source,
          absl::StrCat("the context rank ended the stream: ", finished.error_message()));
    }
    if (!finished.ok()) {
      return Prefixed(FromGrpcStatus(finished).code(), source, finished.error_message());
    }
  }
  const absl::Status complete = writer.Finish();
  if (!complete.ok()) return Prefixed(complete.code(), source, complete.message());
  return absl::OkStatus();
}

}  // namespace lockstep::transfer

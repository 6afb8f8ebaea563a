// A published UCX offer (UcxOffer.published, docs/transfer-ucx.md): the context rank
// answers a session Offer once the claim's first chunk is about to be staged, and stages
// the rest while the generation rank, which maps the range in place, reads what is
// staged so far. The staged bytes are followed in the range by a header (at the next
// 64-byte boundary) where the context rank publishes:
//
//   +0   blocks staged so far (uint64; stored with release ordering after their bytes
//        and CRC32Cs)
//   +8   how staging ended (uint64): 0 still staging, 1 done, 2 + absl::StatusCode failed
//        (stored with release ordering after the trailer or the message)
//   +16  the trailer's length, +20 the message's length (uint32 each)
//   +64  the serialized PullTrailer (at most kMaxTrailer bytes)
//   +256 the failure's message (at most kMaxMessage bytes)
//   +512 the CRC32C of each block, in staging order (uint32 each)
//
// PublishingSink writes it (the context rank's staging), PublishedReader reads it (the
// generation rank's read in place).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_UCX_PUBLISHED_H_
#define LOCKSTEP_RUNTIME_TRANSFER_UCX_PUBLISHED_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/transfer/chunk_sink.h"

namespace lockstep::transfer {

// Where the header of a range staging `bytes` starts.
size_t PublishedHeaderAt(int64_t bytes);
// The bytes of a published range staging `bytes` in `blocks` blocks (with its header).
size_t PublishedRangeBytes(int64_t bytes, int64_t blocks);

// Stages a pull's chunks into a range of PublishedRangeBytes(bytes, blocks) bytes (the
// bytes copied in place as StagingSink's are) and publishes each chunk's blocks once
// written. `on_first_write` runs once, before the first chunk is written (the claim is
// taken by then): where the offer is answered. Finish publishes how staging ended.
// Thread safety: used by one staging thread; the header is read concurrently by the
// mapping reader.
class PublishingSink : public ChunkSink {
 public:
  // `range` must be 8-byte aligned; the header's words are cleared here.
  PublishingSink(std::byte* range, int64_t bytes, int64_t blocks,
                 std::function<void()> on_first_write);

  bool Write(const ChunkHeader& header, absl::Span<const ByteRange> pieces,
             absl::Span<const uint32_t> crcs, const std::shared_ptr<const void>& keep_alive,
             const absl::Notification& abort) override;
  bool WriteTrailer(const lockstep::v1::PullTrailer& trailer) override;
  absl::Span<std::byte> NextChunkMemory(size_t bytes) override;

  // Publishes `served` (the pull's outcome) as how staging ended: done once OK, with
  // every block and the trailer written; failed otherwise.
  void Finish(const absl::Status& served);
  // Whether on_first_write has run.
  bool started() const { return started_; }

 private:
  void Start();

  InPlaceChunks bytes_;  // the staged bytes, ahead of the header
  std::byte* const header_;
  const int64_t staged_bytes_;
  const int64_t blocks_;
  std::function<void()> on_first_write_;
  bool started_ = false;
  bool trailer_written_ = false;
  int64_t published_ = 0;
};

// Reads a published range mapped in place (`range`: PublishedRangeBytes(bytes, blocks)
// bytes). Thread safety: used by one reading thread.
class PublishedReader {
 public:
  PublishedReader(const std::byte* range, int64_t bytes, int64_t blocks);

  // What a wait gives up on: `deadline`; `cancelled()` (may be empty); `check()`'s error
  // (may be empty; asked about every 64 polls, it limits its own rate).
  struct Bounds {
    absl::Time deadline;
    std::function<bool()> cancelled;
    std::function<absl::Status()> check;
  };
  // Waits until `blocks` blocks are published. OK; the context rank's staging failure
  // (its code, naming the failure); DeadlineExceeded; Cancelled; `check()`'s error.
  absl::Status AwaitBlocks(int64_t blocks, const Bounds& bounds) const;
  // Waits until staging ended, then its trailer: outcomes as AwaitBlocks', and DataLoss
  // for a malformed trailer.
  absl::StatusOr<lockstep::v1::PullTrailer> AwaitTrailer(const Bounds& bounds) const;
  // The CRC32C of every block (read only those published).
  const uint32_t* crcs() const;

 private:
  // Polls until `ready()` or staging failed, within `bounds`: yielding the core between
  // checks for the first 200 us, then sleeping 20 us between them.
  absl::Status Await(const std::function<bool(uint64_t state)>& ready, const Bounds& bounds) const;

  const std::byte* const header_;
  const int64_t blocks_;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_UCX_PUBLISHED_H_

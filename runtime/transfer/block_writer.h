// Where a pull's chunks go on the generation rank, and their checks: the chunks of a
// pull cover the target blocks, then the draft blocks, each in block-table order, and
// land at the same indexes of the local block tables. Shared by both transports
// (kv_puller.h): each brings a chunk's payload into host memory (gRPC: its receive
// buffers, the TCP data plane: a staging buffer) and hands it to Write, which checks it
// and copies it into the blocks through the pools' copiers (kvcache/block_copier.h).
//
// For each chunk: Place() checks that it starts where the stream is and fits the
// request's blocks; Write() checks the CRC32C of every block the chunk completes against
// the sent ones and only then copies the chunk into the blocks, moving the position on.
// A trailer goes to ApplyTrailer().
//
// Thread safety: thread-compatible; one per pull.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_BLOCK_WRITER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_BLOCK_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kvcache/block_copier.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/transfer/chunk_codec.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/transceiver.h"

namespace lockstep::transfer {

class BlockWriter {
 public:
  // `blocks` and `num_tokens` were checked with CheckBlockRefs; `blocks`, `descriptor`
  // and the copiers must outlive the writer.
  BlockWriter(const kv::BlockRefs& blocks, int64_t num_tokens, const KvDescriptor& descriptor,
              const KvCopiers& copiers);

  // Checks a chunk of `size` payload bytes carrying `num_crcs` checksums and remembers
  // where its bytes go. DataLoss when the chunk is out of place, overruns the request's
  // blocks, comes after the trailer, or carries the wrong number of checksums. Changes
  // no position.
  absl::Status Place(const ChunkHeader& header, size_t size, size_t num_crcs);

  // The payload of the chunk the last successful Place() accepted (`payload.size()` is
  // its size; `crcs` its checksums): DataLoss naming the block when a completed block's
  // CRC32C differs from the sent one, and then nothing of the chunk is written;
  // otherwise copies it into the blocks and moves the position past it. A copier error
  // is returned as is.
  absl::Status Write(absl::Span<const std::byte> payload, absl::Span<const uint32_t> crcs);

  // The last message: it must follow every block and match the counts.
  absl::Status ApplyTrailer(const lockstep::v1::PullTrailer& trailer);

  // After the stream ended without error: the trailer must have arrived.
  absl::Status Finish() const;

 private:
  struct Pool {
    kv::PoolKind kind;
    kv::BlockCopier* copier;
    const std::vector<BlockId>* table;
    int32_t count;  // blocks that move
    size_t block_bytes;
  };

  std::vector<Pool> pools_;
  size_t pool_ = 0;     // the pool being written
  int32_t block_ = 0;   // the block being written (table index)
  size_t offset_ = 0;   // bytes of it written
  uint32_t crc_ = 0;    // CRC32C of those bytes
  int64_t bytes_ = 0;   // payload bytes written in all
  bool trailer_seen_ = false;
  // The placed chunk: its bytes' places and the number of blocks it completes.
  std::vector<kv::BlockSpan> spans_;
  size_t placed_bytes_ = 0;
  bool placed_ = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_BLOCK_WRITER_H_

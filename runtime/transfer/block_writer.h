// Where a pull's chunks go on the generation rank, and their checks: the chunks of a
// pull cover the target blocks, then the draft blocks, each in block-table order, and
// land at the same indexes of the local block tables. Shared by both transports
// (kv_puller.h): gRPC copies a chunk out of its receive buffers, the TCP data plane
// reads it straight into the blocks.
//
// For each chunk: Place() checks that it starts where the stream is and lists the runs
// of local block memory its payload fills; then, for every run in order, the run's bytes
// go through Checksum() and EndRun() (which compares a completed block's CRC32C with the
// sent one and moves the position on); a trailer goes to ApplyTrailer().
//
// Thread safety: thread-compatible; one per pull.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_BLOCK_WRITER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_BLOCK_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/transfer/chunk_codec.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/transceiver.h"

namespace lockstep::transfer {

class BlockWriter {
 public:
  // One contiguous part of a chunk's payload, inside one local block.
  struct Run {
    uint8_t* dest = nullptr;
    size_t size = 0;
    bool ends_block = false;  // the run holds the block's last bytes
  };

  // `blocks` and `num_tokens` were checked with CheckBlockRefs; `blocks`, `descriptor`
  // and `slabs` must outlive the writer.
  BlockWriter(const kv::BlockRefs& blocks, int64_t num_tokens, const KvDescriptor& descriptor,
              const KvSlabs& slabs);

  // Checks a chunk of `size` payload bytes carrying `num_crcs` checksums and fills
  // `runs` with where its bytes go. DataLoss when the chunk is out of place, overruns
  // the request's blocks, comes after the trailer, or carries the wrong number of
  // checksums. Changes no position.
  absl::Status Place(const ChunkHeader& header, size_t size, size_t num_crcs,
                     std::vector<Run>* runs);

  // Feeds `n` received bytes of the current run into the running block checksum.
  void Checksum(const uint8_t* data, size_t n);

  // Ends a run placed by the last Place(): for a run that completes its block, the
  // checksum must equal the next of `crcs` (DataLoss naming the block otherwise).
  absl::Status EndRun(const Run& run, absl::Span<const uint32_t> crcs);

  // The last message: it must follow every block and match the counts.
  absl::Status ApplyTrailer(const lockstep::v1::PullTrailer& trailer);

  // After the stream ended without error: the trailer must have arrived.
  absl::Status Finish() const;

 private:
  struct Pool {
    kv::PoolKind kind;
    const kv::BlockLayout* layout;
    const PoolSlab* slab;
    const std::vector<BlockId>* table;
    int32_t count;  // blocks that move
    size_t block_bytes;
  };

  std::vector<Pool> pools_;
  size_t pool_ = 0;       // the pool being written
  int32_t block_ = 0;     // the block being written (table index)
  size_t offset_ = 0;     // bytes of it written
  uint32_t crc_ = 0;      // CRC32C of those bytes
  size_t crc_index_ = 0;  // checksums of the current chunk used
  int64_t bytes_ = 0;     // payload bytes written in all
  bool trailer_seen_ = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_BLOCK_WRITER_H_

// Where the context rank's serving thread writes one pull's stream (kv_transfer_server.h):
// a gRPC server stream, or a connection of the TCP data plane (tcp_data_server.h).
//
// Thread safety: used by one serving thread.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_CHUNK_SINK_H_
#define LOCKSTEP_RUNTIME_TRANSFER_CHUNK_SINK_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/transfer/chunk_codec.h"

namespace lockstep::transfer {

class ChunkSink {
 public:
  virtual ~ChunkSink() = default;

  // Sends one chunk: `pieces` concatenated, with the CRC32C of every block it completes.
  // `keep_alive` is held for as long as the sink references the pieces after returning
  // (see chunk_codec.h); a sink that copies them ignores it. A write stops early once
  // `abort` is notified. False when the stream is gone (the puller cancelled, the
  // deadline passed, the connection broke, or `abort`).
  virtual bool Write(const ChunkHeader& header, absl::Span<const ByteRange> pieces,
                     absl::Span<const uint32_t> crcs, const std::shared_ptr<const void>& keep_alive,
                     const absl::Notification& abort) = 0;

  // Sends the trailer, after every block; false as for Write.
  virtual bool WriteTrailer(const lockstep::v1::PullTrailer& trailer) = 0;

  // Where the next chunk's `bytes` may be copied out of the blocks directly, when the
  // sink stores the stream in memory of its own (UCX staging); empty otherwise. The
  // chunk is still passed to Write, which skips copying a piece already in place.
  virtual absl::Span<std::byte> NextChunkMemory(size_t /*bytes*/) { return {}; }
};

// A sink's own memory (`capacity` bytes at `data`) filled with a stream's chunks in
// order: what NextChunkMemory hands out and what Write appends, a piece already copied
// into place being skipped. Used by the sinks that stage a pull in memory (UCX).
class InPlaceChunks {
 public:
  InPlaceChunks(std::byte* data, int64_t capacity) : data_(data), capacity_(capacity) {}

  // Where the next `bytes` go; empty when they would pass the capacity.
  absl::Span<std::byte> Next(size_t bytes) const {
    if (static_cast<int64_t>(bytes) > capacity_ - used_) return {};
    return {data_ + used_, bytes};
  }
  // Appends `pieces`, copying each one not in place already; false (the rest not
  // appended) when a piece would pass the capacity.
  bool Append(absl::Span<const ByteRange> pieces) {
    for (const ByteRange& piece : pieces) {
      if (static_cast<int64_t>(piece.size) > capacity_ - used_) return false;
      if (reinterpret_cast<const std::byte*>(piece.data) != data_ + used_) {
        std::memcpy(data_ + used_, piece.data, piece.size);
      }
      used_ += static_cast<int64_t>(piece.size);
    }
    return true;
  }
  int64_t used() const { return used_; }

 private:
  std::byte* const data_;
  const int64_t capacity_;
  int64_t used_ = 0;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_CHUNK_SINK_H_

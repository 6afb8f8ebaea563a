// The wire encoding of lockstep.v1.BlockChunk (proto/kv_transfer.proto), written and
// read by hand so that KV bytes are never copied through a protobuf message:
//
//  * EncodeChunk references the payload where it lies (the context rank's KV slab)
//    through gRPC slices that hold `keep_alive` until gRPC releases them; the bytes are
//    read by the socket write, nothing else.
//  * DecodeChunk parses a received message in place: the payload stays in gRPC's
//    receive slices (PayloadView), from which the generation rank checks and copies it
//    into its own blocks.
//
// Both produce and accept exactly the protobuf wire format, so generated code reads
// what EncodeChunk writes and DecodeChunk reads what generated code writes (tested).
//
// Thread safety: value types and pure functions.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_CHUNK_CODEC_H_
#define LOCKSTEP_RUNTIME_TRANSFER_CHUNK_CODEC_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/kv_transfer.pb.h"

namespace lockstep::transfer {

// Bounds of a chunk's payload, and of a whole chunk message on the wire.
inline constexpr size_t kMinChunkBytes = 4 << 10;
inline constexpr size_t kMaxChunkBytes = 4 << 20;
inline constexpr size_t kMaxChunkMessageBytes = kMaxChunkBytes + (64 << 10);

// Where a chunk's payload starts: byte `block_offset` of the block at index
// `first_block` of the request's block table of `pool`.
struct ChunkHeader {
  lockstep::v1::KvPool pool = lockstep::v1::KV_POOL_UNSPECIFIED;
  int32_t first_block = 0;
  int64_t block_offset = 0;
};

// A run of payload bytes in memory.
struct ByteRange {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// A BlockChunk whose payload is `pieces` concatenated. With `keep_alive` the pieces are
// referenced, and every reference gRPC holds keeps `keep_alive` alive (so its owner
// learns when gRPC has let go of the bytes); without it they are copied.
grpc::ByteBuffer EncodeChunk(const ChunkHeader& header, absl::Span<const ByteRange> pieces,
                             absl::Span<const uint32_t> block_crc32c,
                             const std::shared_ptr<const void>& keep_alive);

// The last message of a stream: a BlockChunk with only the trailer.
grpc::ByteBuffer EncodeTrailer(const lockstep::v1::PullTrailer& trailer);

// A payload left in the slices it arrived in.
class PayloadView {
 public:
  PayloadView() = default;
  PayloadView(std::vector<grpc::Slice> slices, size_t slice, size_t offset, size_t size)
      : slices_(std::move(slices)), slice_(slice), offset_(offset), size_(size) {}

  size_t size() const { return size_; }

  // Calls fn(const uint8_t* data, size_t n) for the contiguous runs that make up
  // payload bytes [begin, begin + n), in order. Requires begin + n <= size().
  template <typename Fn>
  void ForEachRun(size_t begin, size_t n, Fn&& fn) const {
    if (n == 0) return;
    size_t slice = slice_;
    size_t offset = offset_ + begin;
    while (offset >= slices_[slice].size()) offset -= slices_[slice++].size();
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice].size() - offset);
      fn(slices_[slice].begin() + offset, take);
      n -= take;
      offset = 0;
      ++slice;
    }
  }

 private:
  std::vector<grpc::Slice> slices_;
  size_t slice_ = 0;   // the slice holding the first payload byte
  size_t offset_ = 0;  // its offset there
  size_t size_ = 0;
};

struct DecodedChunk {
  ChunkHeader header;
  PayloadView payload;
  std::vector<uint32_t> block_crc32c;
  std::optional<lockstep::v1::PullTrailer> trailer;
};

// Parses one BlockChunk. DataLoss on malformed input (a truncated field, a group, a
// repeated payload, a varint out of range); unknown fields are skipped.
absl::StatusOr<DecodedChunk> DecodeChunk(const grpc::ByteBuffer& buffer);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_CHUNK_CODEC_H_

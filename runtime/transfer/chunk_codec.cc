#include "runtime/transfer/chunk_codec.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace lockstep::transfer {
namespace {

// Field numbers of lockstep.v1.BlockChunk.
constexpr int kPoolField = 1;
constexpr int kFirstBlockField = 2;
constexpr int kBlockOffsetField = 3;
constexpr int kPayloadField = 4;
constexpr int kCrcField = 5;
constexpr int kTrailerField = 6;

// Wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

// A trailer is a few varints; anything longer is not one of ours.
constexpr uint64_t kMaxTrailerBytes = 1024;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(std::string* out, int field, int wire_type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

// What a referencing slice holds; deleted when gRPC drops the slice.
struct SliceHold {
  std::shared_ptr<const void> keep_alive;
};
void ReleaseHold(void* hold) { delete static_cast<SliceHold*>(hold); }

absl::Status Malformed(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed BlockChunk: ", what));
}

// Reads the protobuf wire format across a sequence of slices.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    for (const grpc::Slice& s : slices) remaining_ += s.size();
    Settle();
  }

  size_t remaining() const { return remaining_; }
  size_t slice() const { return slice_; }
  size_t offset() const { return offset_; }

  bool ReadVarint(uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (remaining_ == 0) return false;
      const uint8_t byte = slices_[slice_].begin()[offset_];
      Advance(1);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  bool ReadFixed32(uint32_t* value) {
    if (remaining_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<uint32_t>(slices_[slice_].begin()[offset_]) << (8 * i);
      Advance(1);
    }
    *value = v;
    return true;
  }

  bool ReadString(size_t n, std::string* out) {
    if (n > remaining_) return false;
    out->clear();
    while (n > 0) {
      const size_t take = std::min(n, slices_[slice_].size() - offset_);
      out->append(reinterpret_cast<const char*>(slices_[slice_].begin() + offset_), take);
      Advance(take);
      n -= take;
    }
    return true;
  }

  bool Skip(uint64_t n) {
    if (n > remaining_) return false;
    while (n > 0) {
      const size_t take = std::min<uint64_t>(n, slices_[slice_].size() - offset_);
      Advance(take);
      n -= take;
    }
    return true;
  }

 private:
  // Moves `n` bytes forward within the current slice (n <= what is left in it).
  void Advance(size_t n) {
    offset_ += n;
    remaining_ -= n;
    Settle();
  }
  void Settle() {
    while (slice_ < slices_.size() && offset_ == slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0;
  size_t offset_ = 0;
  size_t remaining_ = 0;
};

}  // namespace

grpc::ByteBuffer EncodeChunk(const ChunkHeader& header, absl::Span<const ByteRange> pieces,
                             absl::Span<const uint32_t> block_crc32c,
                             const std::shared_ptr<const void>& keep_alive) {
  size_t payload_bytes = 0;
  for (const ByteRange& piece : pieces) payload_bytes += piece.size;
  std::string head;
  PutTag(&head, kPoolField, kVarint);
  PutVarint(&head, static_cast<uint64_t>(header.pool));
  PutTag(&head, kFirstBlockField, kVarint);
  PutVarint(&head, static_cast<uint64_t>(static_cast<int64_t>(header.first_block)));
  PutTag(&head, kBlockOffsetField, kVarint);
  PutVarint(&head, static_cast<uint64_t>(header.block_offset));
  PutTag(&head, kPayloadField, kLengthDelimited);
  PutVarint(&head, payload_bytes);

  std::vector<grpc::Slice> slices;
  slices.reserve(pieces.size() + 2);
  slices.emplace_back(head);
  for (const ByteRange& piece : pieces) {
    if (piece.size == 0) continue;
    if (keep_alive != nullptr) {
      // grpc::Slice takes a mutable pointer but only reads through it.
      slices.emplace_back(const_cast<uint8_t*>(piece.data), piece.size, &ReleaseHold,
                          new SliceHold{keep_alive});
    } else {
      slices.emplace_back(piece.data, piece.size);
    }
  }
  if (!block_crc32c.empty()) {
    std::string tail;
    PutTag(&tail, kCrcField, kLengthDelimited);
    PutVarint(&tail, 4 * block_crc32c.size());
    for (uint32_t crc : block_crc32c) {
      for (int i = 0; i < 4; ++i) tail.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    }
    slices.emplace_back(tail);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ByteBuffer EncodeTrailer(const lockstep::v1::PullTrailer& trailer) {
  lockstep::v1::BlockChunk chunk;
  *chunk.mutable_trailer() = trailer;
  const grpc::Slice slice(chunk.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<DecodedChunk> DecodeChunk(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return Malformed("unreadable buffer");
  DecodedChunk chunk;
  Cursor in(slices);
  bool has_payload = false;
  size_t payload_slice = 0;
  size_t payload_offset = 0;
  uint64_t payload_size = 0;
  while (in.remaining() > 0) {
    uint64_t key = 0;
    if (!in.ReadVarint(&key)) return Malformed("truncated field key");
    const uint64_t field = key >> 3;
    const int wire_type = static_cast<int>(key & 7);
    uint64_t value = 0;
    if (field == kPoolField || field == kFirstBlockField || field == kBlockOffsetField) {
      if (wire_type != kVarint || !in.ReadVarint(&value)) {
        return Malformed(absl::StrCat("field ", field, " is not a varint"));
      }
      const int64_t v = static_cast<int64_t>(value);
      if (field == kPoolField) {
        if (!lockstep::v1::KvPool_IsValid(static_cast<int>(v)) || v != static_cast<int>(v)) {
          return Malformed(absl::StrCat("unknown pool ", v));
        }
        chunk.header.pool = static_cast<lockstep::v1::KvPool>(v);
      } else if (field == kFirstBlockField) {
        if (v < 0 || v > INT32_MAX) return Malformed(absl::StrCat("first_block ", v));
        chunk.header.first_block = static_cast<int32_t>(v);
      } else {
        if (v < 0) return Malformed(absl::StrCat("block_offset ", v));
        chunk.header.block_offset = v;
      }
    } else if (field == kPayloadField) {
      if (wire_type != kLengthDelimited || has_payload || !in.ReadVarint(&payload_size) ||
          payload_size > in.remaining()) {
        return Malformed("bad payload field");
      }
      has_payload = true;
      payload_slice = in.slice();
      payload_offset = in.offset();
      in.Skip(payload_size);
    } else if (field == kCrcField) {
      uint32_t crc = 0;
      if (wire_type == kFixed32) {
        if (!in.ReadFixed32(&crc)) return Malformed("truncated block_crc32c");
        chunk.block_crc32c.push_back(crc);
        continue;
      }
      if (wire_type != kLengthDelimited || !in.ReadVarint(&value) || value % 4 != 0 ||
          value > in.remaining()) {
        return Malformed("bad block_crc32c field");
      }
      for (uint64_t i = 0; i < value / 4; ++i) {
        in.ReadFixed32(&crc);
        chunk.block_crc32c.push_back(crc);
      }
    } else if (field == kTrailerField) {
      std::string bytes;
      if (wire_type != kLengthDelimited || !in.ReadVarint(&value) || value > kMaxTrailerBytes ||
          !in.ReadString(value, &bytes)) {
        return Malformed("bad trailer field");
      }
      chunk.trailer.emplace();
      if (!chunk.trailer->ParseFromString(bytes)) return Malformed("unparsable trailer");
    } else {
      bool ok = field != 0;
      switch (wire_type) {
        case kVarint:
          ok = ok && in.ReadVarint(&value);
          break;
        case kFixed64:
          ok = ok && in.Skip(8);
          break;
        case kLengthDelimited:
          ok = ok && in.ReadVarint(&value) && in.Skip(value);
          break;
        case kFixed32:
          ok = ok && in.Skip(4);
          break;
        default:
          ok = false;
      }
      if (!ok) return Malformed(absl::StrCat("bad unknown field ", field));
    }
  }
  chunk.payload = PayloadView(std::move(slices), payload_slice, payload_offset, payload_size);
  return chunk;
}

}  // namespace lockstep::transfer

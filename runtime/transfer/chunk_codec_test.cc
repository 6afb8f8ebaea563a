#include "runtime/transfer/chunk_codec.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::lockstep::v1::BlockChunk;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` cut into slices at random points, as the transport may deliver them.
grpc::ByteBuffer Sliced(const std::string& bytes, std::mt19937_64& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t take = std::min<size_t>(bytes.size() - at, 1 + rng() % 64);
    slices.emplace_back(bytes.data() + at, take);
    at += take;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string PayloadOf(const DecodedChunk& chunk) {
  std::string out;
  chunk.payload.ForEachRun(0, chunk.payload.size(), [&](const uint8_t* data, size_t n) {
    out.append(reinterpret_cast<const char*>(data), n);
  });
  return out;
}

TEST(ChunkCodecTest, GeneratedCodeReadsWhatEncodeChunkWrites) {
  std::vector<uint8_t> block_a(1000), block_b(300);
  for (size_t i = 0; i < block_a.size(); ++i) block_a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < block_b.size(); ++i) block_b[i] = static_cast<uint8_t>(i * 13 + 1);
  auto keep_alive = std::make_shared<int>(0);
  {
    const ByteRange pieces[] = {{block_a.data(), block_a.size()}, {block_b.data(), block_b.size()}};
    const uint32_t crcs[] = {0xdeadbeef, 7};
    const grpc::ByteBuffer buffer =
        EncodeChunk({lockstep::v1::KV_POOL_DRAFT, 12, 345}, pieces, crcs, keep_alive);
    EXPECT_GT(keep_alive.use_count(), 1);  // the slices hold it
    BlockChunk parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
    EXPECT_EQ(parsed.pool(), lockstep::v1::KV_POOL_DRAFT);
    EXPECT_EQ(parsed.first_block(), 12);
    EXPECT_EQ(parsed.block_offset(), 345);
    EXPECT_EQ(parsed.payload(), std::string(block_a.begin(), block_a.end()) +
                                    std::string(block_b.begin(), block_b.end()));
    EXPECT_THAT(parsed.block_crc32c(), ::testing::ElementsAre(0xdeadbeef, 7));
    EXPECT_FALSE(parsed.has_trailer());
  }
  EXPECT_EQ(keep_alive.use_count(), 1);  // every slice let go

  lockstep::v1::PullTrailer trailer;
  trailer.set_target_blocks(3);
  trailer.set_draft_blocks(2);
  trailer.set_payload_bytes(1 << 20);
  BlockChunk parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(EncodeTrailer(trailer))));
  EXPECT_EQ(parsed.trailer().payload_bytes(), 1 << 20);
  EXPECT_TRUE(parsed.payload().empty());
}

TEST(ChunkCodecTest, CopiesWithoutKeepAlive) {
  std::vector<uint8_t> block(64, 5);
  const ByteRange piece{block.data(), block.size()};
  const grpc::ByteBuffer buffer =
      EncodeChunk({lockstep::v1::KV_POOL_TARGET, 0, 0}, {&piece, 1}, {}, nullptr);
  block.assign(64, 9);
  absl::StatusOr<DecodedChunk> chunk = DecodeChunk(buffer);
  ASSERT_THAT(chunk.status(), IsOk());
  EXPECT_EQ(PayloadOf(*chunk), std::string(64, 5));
}

// DecodeChunk reads what generated code writes, however the bytes are sliced, with
// fields in any order and unknown fields mixed in.
TEST(ChunkCodecTest, DecodesGeneratedMessagesAcrossSlices) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 50; ++round) {
    BlockChunk message;
    message.set_pool(round % 2 ? lockstep::v1::KV_POOL_TARGET : lockstep::v1::KV_POOL_DRAFT);
    message.set_first_block(static_cast<int32_t>(rng() % 100000));
    message.set_block_offset(static_cast<int64_t>(rng() % (1ll << 40)));
    std::string payload(rng() % 5000, '\0');
    for (char& c : payload) c = static_cast<char>(rng());
    message.set_payload(payload);
    for (uint64_t i = rng() % 6; i > 0; --i) message.add_block_crc32c(static_cast<uint32_t>(rng()));
    if (round % 5 == 0) message.mutable_trailer()->set_draft_blocks(round);
    std::string bytes = message.SerializeAsString();
    if (round % 3 == 0) {
      // Unknown fields (varint 9, bytes 10, fixed64 11, fixed32 12) in front.
      bytes = std::string("\x48\x05\x52\x02xy\x59", 7) + std::string(8, 'a') + "\x65" +
              std::string(4, 'b') + bytes;
    }
    absl::StatusOr<DecodedChunk> chunk = DecodeChunk(Sliced(bytes, rng));
    ASSERT_THAT(chunk.status(), IsOk()) << "round " << round;
    EXPECT_EQ(chunk->header.pool, message.pool());
    EXPECT_EQ(chunk->header.first_block, message.first_block());
    EXPECT_EQ(chunk->header.block_offset, message.block_offset());
    EXPECT_EQ(PayloadOf(*chunk), payload);
    EXPECT_EQ(chunk->block_crc32c,
              std::vector<uint32_t>(message.block_crc32c().begin(), message.block_crc32c().end()));
    EXPECT_EQ(chunk->trailer.has_value(), message.has_trailer());
    // A sub-range of the payload comes back in order.
    if (payload.size() > 10) {
      std::string middle;
      chunk->payload.ForEachRun(3, payload.size() - 7, [&](const uint8_t* data, size_t n) {
        middle.append(reinterpret_cast<const char*>(data), n);
      });
      EXPECT_EQ(middle, payload.substr(3, payload.size() - 7));
    }
  }
}

TEST(ChunkCodecTest, RejectsMalformedInputWithoutCrashing) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  BlockChunk message;
  message.set_pool(lockstep::v1::KV_POOL_TARGET);
  message.set_first_block(3);
  message.set_payload(std::string(100, 'p'));
  message.add_block_crc32c(1);
  const std::string bytes = message.SerializeAsString();
  // Every strict prefix cut inside a field fails cleanly; cuts between fields decode.
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    const absl::StatusOr<DecodedChunk> chunk = DecodeChunk(Sliced(bytes.substr(0, cut), rng));
    if (!chunk.ok()) {
      EXPECT_THAT(chunk.status(), StatusIs(absl::StatusCode::kDataLoss)) << "cut at " << cut;
    }
  }
  const std::vector<std::string> bad = {
      std::string("\x08\x07", 2),                  // pool 7
      std::string("\x10\xff\xff\xff\xff\x0f", 6),  // first_block 2^32 - 1
      std::string("\x22\x05xx", 4),                // payload longer than the message
      std::string("\x22\x01x\x22\x01y", 6),        // two payloads
      std::string("\x2a\x03xyz", 5),               // crc bytes not a multiple of 4
      std::string("\x0b", 1),                      // a group
      std::string("\x00\x01", 2),                  // field 0
      std::string(11, '\xff'),                     // an endless varint
  };
  for (const std::string& b : bad) {
    EXPECT_THAT(DecodeChunk(Sliced(b, rng)).status(), StatusIs(absl::StatusCode::kDataLoss))
        << "input of " << b.size() << " bytes";
  }
  for (int i = 0; i < 2000; ++i) {
    std::string noise(rng() % 64, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    (void)DecodeChunk(Sliced(noise, rng));  // must not crash or read out of bounds
  }
}

}  // namespace
}  // namespace lockstep::transfer

#include "runtime/transfer/block_writer.h"

#include <cstring>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/transfer/crc32c.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// 1 KiB target blocks (16 tokens); no draft pool.
class BlockWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    descriptor_.model = "m";
    descriptor_.target =
        kv::BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .tokens_per_block = 16};
    slab_.assign(8 * descriptor_.target->BlockFloats(), 0.0f);
    slabs_.target = {slab_.data(), 8};
    blocks_.id = RequestId(1);
    blocks_.generation = 1;
    blocks_.blocks = {BlockId(5), BlockId(2), BlockId(7)};
  }

  uint8_t* Block(int32_t id) {
    return reinterpret_cast<uint8_t*>(slab_.data()) + static_cast<size_t>(id) * kBlockBytes;
  }

  static constexpr size_t kBlockBytes = 1024;
  KvDescriptor descriptor_;
  std::vector<float> slab_;
  KvSlabs slabs_;
  kv::BlockRefs blocks_;
  int64_t num_tokens_ = 40;  // 3 blocks, the last partial
};

TEST_F(BlockWriterTest, PlacesRunsAcrossBlockBoundariesAndChecksEachBlock) {
  BlockWriter writer(blocks_, num_tokens_, descriptor_, slabs_);
  std::vector<uint8_t> payload(3 * kBlockBytes);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  std::vector<BlockWriter::Run> runs;
  // First chunk: block 0 and half of block 1.
  const ChunkHeader first{lockstep::v1::KV_POOL_TARGET, 0, 0};
  const std::vector<uint32_t> crc0 = {Crc32c(payload.data(), kBlockBytes)};
  ASSERT_THAT(writer.Place(first, kBlockBytes + 512, 1, &runs), IsOk());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].dest, Block(5));
  EXPECT_TRUE(runs[0].ends_block);
  EXPECT_EQ(runs[1].dest, Block(2));
  EXPECT_EQ(runs[1].size, 512u);
  EXPECT_FALSE(runs[1].ends_block);
  size_t at = 0;
  for (const BlockWriter::Run& run : runs) {
    std::memcpy(run.dest, payload.data() + at, run.size);
    writer.Checksum(run.dest, run.size);
    ASSERT_THAT(writer.EndRun(run, crc0), IsOk());
    at += run.size;
  }
  // Second chunk: the rest of block 1 and block 2, whose checksum is wrong.
  const ChunkHeader second{lockstep::v1::KV_POOL_TARGET, 1, 512};
  const std::vector<uint32_t> crcs = {Crc32c(payload.data() + kBlockBytes, kBlockBytes), 0xdead};
  ASSERT_THAT(writer.Place(second, 512 + kBlockBytes, 2, &runs), IsOk());
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].dest, Block(2) + 512);
  EXPECT_EQ(runs[1].dest, Block(7));
  std::memcpy(runs[0].dest, payload.data() + at, runs[0].size);
  writer.Checksum(runs[0].dest, runs[0].size);
  ASSERT_THAT(writer.EndRun(runs[0], crcs), IsOk());
  std::memcpy(runs[1].dest, payload.data() + at + 512, runs[1].size);
  writer.Checksum(runs[1].dest, runs[1].size);
  EXPECT_THAT(writer.EndRun(runs[1], crcs),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("KV block 2 of the target pool (local block 7) failed")));
}

TEST_F(BlockWriterTest, RefusesChunksOutOfPlaceOverrunningOrWithWrongChecksumCounts) {
  BlockWriter writer(blocks_, num_tokens_, descriptor_, slabs_);
  std::vector<BlockWriter::Run> runs;
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_TARGET, 1, 0}, 16, 0, &runs),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("out of place")));
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_DRAFT, 0, 0}, 16, 0, &runs),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("out of place")));
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_TARGET, 0, 0}, 4 * kBlockBytes, 4, &runs),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("overruns the target blocks by")));
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_TARGET, 0, 0}, 2 * kBlockBytes, 1, &runs),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("1 checksums for 2 completed")));
  // A trailer before the blocks.
  lockstep::v1::PullTrailer trailer;
  trailer.set_target_blocks(3);
  trailer.set_payload_bytes(3 * kBlockBytes);
  EXPECT_THAT(writer.ApplyTrailer(trailer),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("does not match")));
  EXPECT_THAT(writer.Finish(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("trailer")));
}

}  // namespace
}  // namespace lockstep::transfer

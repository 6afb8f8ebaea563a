#include "runtime/transfer/block_writer.h"

#include <cstddef>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "kvcache/testing/fake_device_allocator.h"
#include "runtime/transfer/crc32c.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// 1 KiB target blocks (16 tokens) on fake device memory, reached only through its
// copier; no draft pool.
class BlockWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    descriptor_.model = "m";
    descriptor_.target =
        kv::BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .tokens_per_block = 16};
    absl::StatusOr<std::byte*> slab = device_.Allocate(8 * kBlockBytes);
    ASSERT_THAT(slab, IsOk());
    slab_ = *slab;
    absl::StatusOr<std::unique_ptr<kv::BlockCopier>> copier =
        device_.MakeCopier(slab_, *descriptor_.target, 8);
    ASSERT_THAT(copier, IsOk());
    copier_ = std::move(*copier);
    copiers_.target = copier_.get();
    blocks_.id = RequestId(1);
    blocks_.generation = 1;
    blocks_.blocks = {BlockId(5), BlockId(2), BlockId(7)};
  }
  void TearDown() override {
    copier_.reset();
    if (slab_ != nullptr) device_.Free(slab_, 8 * kBlockBytes);
  }

  // Bytes [offset, offset + n) of block `id`, read through the copier.
  std::vector<std::byte> Read(int32_t id, size_t offset, size_t n) {
    std::vector<std::byte> out(n);
    EXPECT_THAT(copier_->CopyOut({{BlockId(id), offset, n}}, absl::MakeSpan(out)), IsOk());
    return out;
  }

  static constexpr size_t kBlockBytes = 1024;
  kv::testing::FakeDeviceAllocator device_;
  std::byte* slab_ = nullptr;
  std::unique_ptr<kv::BlockCopier> copier_;
  KvDescriptor descriptor_;
  KvCopiers copiers_;
  kv::BlockRefs blocks_;
  int64_t num_tokens_ = 40;  // 3 blocks, the last partial
};

std::vector<std::byte> Bytes(const std::vector<std::byte>& from, size_t at, size_t n) {
  return {from.begin() + static_cast<std::ptrdiff_t>(at),
          from.begin() + static_cast<std::ptrdiff_t>(at + n)};
}

TEST_F(BlockWriterTest, WritesAcrossBlockBoundariesThroughTheCopierAndChecksEachBlock) {
  BlockWriter writer(blocks_, num_tokens_, descriptor_, copiers_);
  std::vector<std::byte> payload(3 * kBlockBytes);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 7);
  // First chunk: block 0 and half of block 1.
  const ChunkHeader first{lockstep::v1::KV_POOL_TARGET, 0, 0};
  const std::vector<uint32_t> crc0 = {Crc32c(payload.data(), kBlockBytes)};
  ASSERT_THAT(writer.Place(first, kBlockBytes + 512, 1), IsOk());
  ASSERT_THAT(writer.Write(absl::MakeConstSpan(payload).first(kBlockBytes + 512), crc0), IsOk());
  EXPECT_EQ(device_.copy_in_calls(), 1);  // one copy per chunk
  EXPECT_EQ(Read(5, 0, kBlockBytes), Bytes(payload, 0, kBlockBytes));
  EXPECT_EQ(Read(2, 0, 512), Bytes(payload, kBlockBytes, 512));
  // A payload without a placed chunk is a bug of the caller.
  EXPECT_THAT(writer.Write(absl::MakeConstSpan(payload).first(16), {}),
              StatusIs(absl::StatusCode::kInternal));

  // Second chunk: the rest of block 1 and block 2, whose checksum is wrong: nothing of
  // the chunk is written.
  const ChunkHeader second{lockstep::v1::KV_POOL_TARGET, 1, 512};
  const std::vector<uint32_t> bad = {Crc32c(payload.data() + kBlockBytes, kBlockBytes), 0xdead};
  const auto rest = absl::MakeConstSpan(payload).subspan(kBlockBytes + 512);
  ASSERT_THAT(writer.Place(second, 512 + kBlockBytes, 2), IsOk());
  EXPECT_THAT(writer.Write(rest, bad),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("KV block 2 of the target pool (local block 7) failed")));
  EXPECT_EQ(device_.copy_in_calls(), 1);
  EXPECT_EQ(Read(7, 0, 4), std::vector<std::byte>(4, std::byte{0}));

  // The same chunk with the right checksums lands, and the trailer closes the stream.
  const std::vector<uint32_t> good = {bad[0], Crc32c(payload.data() + 2 * kBlockBytes, kBlockBytes)};
  ASSERT_THAT(writer.Place(second, 512 + kBlockBytes, 2), IsOk());
  ASSERT_THAT(writer.Write(rest, good), IsOk());
  EXPECT_EQ(Read(2, 512, 512), Bytes(payload, kBlockBytes + 512, 512));
  EXPECT_EQ(Read(7, 0, kBlockBytes), Bytes(payload, 2 * kBlockBytes, kBlockBytes));
  lockstep::v1::PullTrailer trailer;
  trailer.set_target_blocks(3);
  trailer.set_payload_bytes(3 * kBlockBytes);
  ASSERT_THAT(writer.ApplyTrailer(trailer), IsOk());
  EXPECT_THAT(writer.Finish(), IsOk());
}

TEST_F(BlockWriterTest, RefusesChunksOutOfPlaceOverrunningOrWithWrongChecksumCounts) {
  BlockWriter writer(blocks_, num_tokens_, descriptor_, copiers_);
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_TARGET, 1, 0}, 16, 0),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("out of place")));
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_DRAFT, 0, 0}, 16, 0),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("out of place")));
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_TARGET, 0, 0}, 4 * kBlockBytes, 4),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("overruns the target blocks by")));
  EXPECT_THAT(writer.Place({lockstep::v1::KV_POOL_TARGET, 0, 0}, 2 * kBlockBytes, 1),
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

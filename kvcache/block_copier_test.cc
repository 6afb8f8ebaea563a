#include "kvcache/block_copier.h"

#include <cstddef>
#include <vector>

#include "common/ids.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// 4 blocks of 2 layers x 2 heads x 2 tokens x 2 dims of bf16: 64 bytes each.
BlockLayout Bf16Layout() {
  return BlockLayout{
      .num_layers = 2, .num_kv_heads = 2, .head_dim = 2, .tokens_per_block = 2, .element_bytes = 2};
}

class HostBlockCopierTest : public ::testing::Test {
 protected:
  HostBlockCopierTest()
      : slab_(4 * Bf16Layout().BlockBytes()), copier_(slab_.data(), Bf16Layout(), 4) {
    for (size_t i = 0; i < slab_.size(); ++i) slab_[i] = static_cast<std::byte>(i);
  }

  std::vector<std::byte> slab_;
  HostBlockCopier copier_;
};

TEST(BlockLayoutTest, ElementBytesSizeTheBlock) {
  BlockLayout layout = Bf16Layout();
  EXPECT_EQ(layout.BlockElements(), 32u);
  EXPECT_EQ(layout.BlockBytes(), 64u);
  EXPECT_EQ(layout.ByteOffset(1, 1, 1, 1), 2 * layout.Offset(1, 1, 1, 1));
  layout.element_bytes = 4;
  EXPECT_EQ(layout.BlockBytes(), 128u);
  layout.element_bytes = 3;
  EXPECT_THAT(layout.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("element_bytes")));
}

TEST_F(HostBlockCopierTest, GathersSpansInOrderAndScattersThemBack) {
  EXPECT_EQ(copier_.memory_kind(), MemoryKind::kHost);
  EXPECT_EQ(copier_.block_bytes(), 64u);
  // Block 3 whole, an empty span, the last 8 bytes of block 1, the first 4 of block 0.
  const std::vector<BlockSpan> spans = {
      {BlockId(3), 0, 64}, {BlockId(2), 10, 0}, {BlockId(1), 56, 8}, {BlockId(0), 0, 4}};
  std::vector<std::byte> out(76);
  ASSERT_THAT(copier_.CopyOut(spans, absl::MakeSpan(out)), IsOk());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(out[i], static_cast<std::byte>(192 + i)) << i;
  for (size_t i = 0; i < 8; ++i) ASSERT_EQ(out[64 + i], static_cast<std::byte>(120 + i)) << i;
  for (size_t i = 0; i < 4; ++i) ASSERT_EQ(out[72 + i], static_cast<std::byte>(i)) << i;

  // Scatter the same bytes to other places: block 2 gets block 3's bytes.
  const std::vector<BlockSpan> to = {{BlockId(2), 0, 64}, {BlockId(0), 8, 12}};
  ASSERT_THAT(copier_.CopyIn(absl::MakeConstSpan(out), to), IsOk());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(slab_[128 + i], static_cast<std::byte>(192 + i)) << i;
  EXPECT_EQ(slab_[8], static_cast<std::byte>(120));
  EXPECT_EQ(slab_[19], static_cast<std::byte>(3));
  EXPECT_EQ(slab_[20], static_cast<std::byte>(20));  // past the span: untouched
  EXPECT_EQ(slab_[7], static_cast<std::byte>(7));
}

TEST_F(HostBlockCopierTest, RejectsBadSpansAndSizesWithoutCopying) {
  std::vector<std::byte> out(8, std::byte{0xee});
  EXPECT_THAT(copier_.CopyOut({{BlockId(4), 0, 8}}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block 4 of a pool of 4")));
  EXPECT_THAT(copier_.CopyOut({{BlockId(-1), 0, 8}}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(copier_.CopyOut({{BlockId(0), 60, 8}}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("runs past the block")));
  EXPECT_THAT(copier_.CopyOut({{BlockId(0), 0, 4}}, absl::MakeSpan(out)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("host buffer has 8")));
  EXPECT_EQ(out[0], std::byte{0xee});
  // A bad span after a good one: nothing is written.
  EXPECT_THAT(copier_.CopyIn(absl::MakeConstSpan(out), {{BlockId(0), 0, 4}, {BlockId(9), 0, 4}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(slab_[0], std::byte{0});
  EXPECT_THAT(copier_.CopyIn(absl::MakeConstSpan(out), {{BlockId(0), 0, 9}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(HostBlockCopierTest, CopyInCachedScattersLikeCopyInWithItsChecks) {
  std::vector<std::byte> in(76);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::byte>(250 - i);
  const std::vector<BlockSpan> to = {{BlockId(2), 0, 64}, {BlockId(0), 8, 12}};
  ASSERT_THAT(copier_.CopyInCached(absl::MakeConstSpan(in), to), IsOk());
  for (size_t i = 0; i < 64; ++i) ASSERT_EQ(slab_[128 + i], in[i]) << i;
  for (size_t i = 0; i < 12; ++i) ASSERT_EQ(slab_[8 + i], in[64 + i]) << i;
  EXPECT_EQ(slab_[20], static_cast<std::byte>(20));  // past the span: untouched
  EXPECT_EQ(slab_[7], static_cast<std::byte>(7));
  EXPECT_EQ(slab_[192], static_cast<std::byte>(192));  // block 3: untouched
  // A bad span after a good one: nothing is written.
  EXPECT_THAT(copier_.CopyInCached(absl::MakeConstSpan(in).first(8),
                                   {{BlockId(1), 0, 4}, {BlockId(9), 0, 4}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block 9 of a pool of 4")));
  EXPECT_EQ(slab_[64], static_cast<std::byte>(64));
}

TEST_F(HostBlockCopierTest, CopyBlocksInCachedWritesEachSourceToItsBlock) {
  std::vector<std::byte> a(64, std::byte{0xa0});
  std::vector<std::byte> b(64, std::byte{0xb0});
  ASSERT_THAT(copier_.CopyBlocksInCached({{b.data(), BlockId(3)}, {a.data(), BlockId(1)}}), IsOk());
  for (size_t i = 0; i < 64; ++i) {
    ASSERT_EQ(slab_[64 + i], std::byte{0xa0}) << i;
    ASSERT_EQ(slab_[192 + i], std::byte{0xb0}) << i;
  }
  EXPECT_EQ(slab_[0], static_cast<std::byte>(0));      // block 0: untouched
  EXPECT_EQ(slab_[128], static_cast<std::byte>(128));  // block 2: untouched
  // A block outside the pool after a good one: nothing is written.
  EXPECT_THAT(copier_.CopyBlocksInCached({{a.data(), BlockId(0)}, {a.data(), BlockId(4)}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block 4 of a pool of 4")));
  EXPECT_EQ(slab_[0], static_cast<std::byte>(0));
}

}  // namespace
}  // namespace lockstep::kv

#include "kvcache/block_allocator.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

TEST(HostAllocatorTest, ReturnsAlignedZeroFilledStorage) {
  HostAllocator allocator;
  EXPECT_EQ(allocator.memory_kind(), MemoryKind::kHost);
  // 1001 bytes is not a multiple of the alignment: the tail must still be usable.
  absl::StatusOr<std::byte*> p = allocator.Allocate(1001);
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % HostAllocator::kAlignment, 0u);
  for (size_t i = 0; i < 1001; ++i) ASSERT_EQ((*p)[i], std::byte{0}) << "byte " << i;
  (*p)[1000] = std::byte{0x5a};
  EXPECT_EQ((*p)[1000], std::byte{0x5a});
  allocator.Free(*p, 1001);
}

TEST(HostAllocatorTest, MakesAHostCopierOverTheSlab) {
  HostAllocator allocator;
  const BlockLayout layout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2,
                           .tokens_per_block = 2, .element_bytes = 2};
  absl::StatusOr<std::byte*> slab = allocator.Allocate(3 * layout.BlockBytes());
  ASSERT_THAT(slab, IsOk());
  absl::StatusOr<std::unique_ptr<BlockCopier>> copier = allocator.MakeCopier(*slab, layout, 3);
  ASSERT_THAT(copier, IsOk());
  EXPECT_EQ((*copier)->memory_kind(), MemoryKind::kHost);
  EXPECT_EQ((*copier)->num_blocks(), 3);
  EXPECT_EQ((*copier)->block_bytes(), 16u);
  (*slab)[2 * 16 + 5] = std::byte{9};
  std::byte out{};
  ASSERT_THAT((*copier)->CopyOut({{BlockId(2), 5, 1}}, absl::MakeSpan(&out, 1)), IsOk());
  EXPECT_EQ(out, std::byte{9});
  copier->reset();
  allocator.Free(*slab, 3 * layout.BlockBytes());
  EXPECT_THAT(allocator.MakeCopier(nullptr, layout, 3),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(HostAllocatorTest, RejectsEmptyAndImpossibleRequests) {
  HostAllocator allocator;
  EXPECT_THAT(allocator.Allocate(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(allocator.Allocate(std::numeric_limits<size_t>::max() / 2),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace lockstep::kv

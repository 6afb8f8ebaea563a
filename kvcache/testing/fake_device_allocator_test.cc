#include "kvcache/testing/fake_device_allocator.h"

#include <cstddef>
#include <memory>
#include <vector>

#include "common/ids.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"

namespace lockstep::kv::testing {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

BlockLayout Layout() {
  return BlockLayout{.num_layers = 1, .num_kv_heads = 2, .head_dim = 4, .tokens_per_block = 4,
                     .element_bytes = 2};
}

TEST(FakeDeviceAllocatorTest, ZeroFilledAndReachableOnlyThroughItsCopier) {
  FakeDeviceAllocator allocator;
  EXPECT_EQ(allocator.memory_kind(), MemoryKind::kDevice);
  const size_t bytes = 4 * Layout().BlockBytes();
  absl::StatusOr<std::byte*> slab = allocator.Allocate(bytes);
  ASSERT_THAT(slab, IsOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*slab) % 64, 0u);
  absl::StatusOr<std::unique_ptr<BlockCopier>> copier = allocator.MakeCopier(*slab, Layout(), 4);
  ASSERT_THAT(copier, IsOk());
  EXPECT_EQ((*copier)->memory_kind(), MemoryKind::kDevice);

  std::vector<std::byte> out(bytes, std::byte{1});
  std::vector<BlockSpan> all;
  for (int b = 0; b < 4; ++b) all.push_back({BlockId(b), 0, Layout().BlockBytes()});
  ASSERT_THAT((*copier)->CopyOut(all, absl::MakeSpan(out)), IsOk());
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(out[i], std::byte{0}) << i;

  const std::vector<std::byte> in = {std::byte{7}, std::byte{8}, std::byte{9}};
  ASSERT_THAT((*copier)->CopyIn(in, {{BlockId(2), 5, 3}}), IsOk());
  std::vector<std::byte> back(3);
  ASSERT_THAT((*copier)->CopyOut({{BlockId(2), 5, 3}}, absl::MakeSpan(back)), IsOk());
  EXPECT_EQ(back, in);
  EXPECT_EQ(allocator.copy_out_calls(), 2);
  EXPECT_EQ(allocator.copy_in_calls(), 1);
  EXPECT_EQ(allocator.bytes_in(), 3);
  EXPECT_EQ(allocator.bytes_out(), static_cast<int64_t>(bytes) + 3);

  // The slab address itself is not readable memory.
  EXPECT_DEATH({ [[maybe_unused]] volatile std::byte b = (*slab)[0]; }, "");

  EXPECT_THAT(allocator.MakeCopier(*slab + 64, Layout(), 1),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(allocator.MakeCopier(*slab, Layout(), 1000),
              StatusIs(absl::StatusCode::kInvalidArgument));
  copier->reset();
  allocator.Free(*slab, bytes);
}

TEST(FakeDeviceAllocatorTest, AKvManagerOnItReportsDeviceMemoryAndCopiesThroughIt) {
  FakeDeviceAllocator allocator;
  KvManagerConfig config;
  config.target.layout = Layout();
  config.target.num_blocks = 8;
  {
    absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(config, &allocator);
    ASSERT_THAT(kv, IsOk());
    EXPECT_EQ((*kv)->memory_kind(), MemoryKind::kDevice);
    BlockCopier* copier = (*kv)->Copier(PoolKind::kTarget);
    ASSERT_NE(copier, nullptr);
    std::vector<std::byte> block(Layout().BlockBytes(), std::byte{3});
    ASSERT_THAT(copier->CopyIn(block, {{BlockId(7), 0, block.size()}}), IsOk());
    EXPECT_EQ(allocator.copy_in_calls(), 1);
  }
  // The manager freed its slab (the destructor checks every allocation came back).
}

}  // namespace
}  // namespace lockstep::kv::testing

#include "kvcache/block_pool.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::IsEmpty;

// Host memory with a ledger, or a refusal when `fail` is set.
class LedgerAllocator : public BlockAllocator {
 public:
  absl::StatusOr<std::byte*> Allocate(size_t bytes) override {
    if (fail) return absl::ResourceExhaustedError("ledger allocator refuses");
    ++allocations;
    outstanding += bytes;
    return host_.Allocate(bytes);
  }
  void Free(std::byte* p, size_t bytes) override {
    outstanding -= bytes;
    host_.Free(p, bytes);
  }
  MemoryKind memory_kind() const override { return MemoryKind::kHost; }
  absl::StatusOr<std::unique_ptr<BlockCopier>> MakeCopier(std::byte* base,
                                                          const BlockLayout& layout,
                                                          int32_t num_blocks) override {
    ++copiers;
    return host_.MakeCopier(base, layout, num_blocks);
  }

  bool fail = false;
  int allocations = 0;
  int copiers = 0;
  size_t outstanding = 0;

 private:
  HostAllocator host_;
};

BlockLayout SmallLayout() {
  return BlockLayout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 4, .tokens_per_block = 4};
}

std::unique_ptr<BlockPool> MakePool(int32_t blocks, int32_t reserved, BlockAllocator* alloc) {
  absl::StatusOr<std::unique_ptr<BlockPool>> pool =
      BlockPool::Create(SmallLayout(), blocks, reserved, alloc);
  EXPECT_THAT(pool, IsOk());
  return pool.ok() ? std::move(*pool) : nullptr;
}

std::vector<std::string> Audit(const BlockPool& pool) {
  std::vector<std::string> out;
  pool.AuditInto("", &out);
  return out;
}

TEST(BlockPoolTest, OneSlabFromTheAllocatorReturnedAtDestruction) {
  LedgerAllocator alloc;
  {
    std::unique_ptr<BlockPool> pool = MakePool(8, 0, &alloc);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(alloc.allocations, 1);
    EXPECT_EQ(alloc.copiers, 1);
    EXPECT_EQ(pool->memory_kind(), MemoryKind::kHost);
    const size_t block_bytes = SmallLayout().BlockBytes();
    EXPECT_EQ(alloc.outstanding, 8 * block_bytes);
    // Block b starts at byte b * BlockBytes(); writing one block through the copier
    // leaves its neighbours alone.
    ASSERT_NE(pool->copier(), nullptr);
    std::vector<std::byte> ones(block_bytes, std::byte{1});
    ASSERT_THAT(pool->copier()->CopyIn(ones, {{BlockId(3), 0, block_bytes}}), IsOk());
    EXPECT_EQ(pool->storage()[3 * block_bytes], std::byte{1});
    EXPECT_EQ(pool->storage()[4 * block_bytes - 1], std::byte{1});
    EXPECT_EQ(pool->storage()[3 * block_bytes - 1], std::byte{0});
    EXPECT_EQ(pool->storage()[4 * block_bytes], std::byte{0});
  }
  EXPECT_EQ(alloc.outstanding, 0u);
}

TEST(BlockPoolTest, CreateRejectsBadArguments) {
  LedgerAllocator alloc;
  EXPECT_THAT(BlockPool::Create(SmallLayout(), 0, 0, &alloc),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BlockPool::Create(SmallLayout(), 4, 5, &alloc),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(BlockPool::Create(SmallLayout(), 4, 0, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
  BlockLayout bad = SmallLayout();
  bad.head_dim = 0;
  EXPECT_THAT(BlockPool::Create(bad, 4, 0, &alloc), StatusIs(absl::StatusCode::kInvalidArgument));
  alloc.fail = true;
  EXPECT_THAT(BlockPool::Create(SmallLayout(), 4, 0, &alloc),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(BlockPoolTest, AscendingFirstThenLifo) {
  LedgerAllocator alloc;
  std::unique_ptr<BlockPool> pool = MakePool(4, 0, &alloc);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(pool->Allocate(false)->value());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(pool->Allocate(false), std::nullopt);
  EXPECT_EQ(pool->Unref(BlockId(1)), 0);
  EXPECT_EQ(pool->Unref(BlockId(3)), 0);
  EXPECT_EQ(pool->Allocate(false), BlockId(3));  // last freed, first reused
  EXPECT_EQ(pool->Allocate(false), BlockId(1));
  EXPECT_THAT(Audit(*pool), IsEmpty());
}

TEST(BlockPoolTest, RefcountsKeepABlockOffTheFreeList) {
  LedgerAllocator alloc;
  std::unique_ptr<BlockPool> pool = MakePool(2, 0, &alloc);
  const BlockId b = *pool->Allocate(false);
  pool->AddRef(b);
  EXPECT_EQ(pool->ref_count(b), 2);
  EXPECT_EQ(pool->Unref(b), 1);
  EXPECT_FALSE(pool->on_free_list(b));
  EXPECT_EQ(pool->num_free(), 1);
  EXPECT_EQ(pool->Unref(b), 0);
  EXPECT_TRUE(pool->on_free_list(b));
  EXPECT_EQ(pool->num_free(), 2);
  EXPECT_THAT(Audit(*pool), IsEmpty());
}

TEST(BlockPoolTest, ReserveServesOnlyTheDummyAndRefillsItself) {
  LedgerAllocator alloc;
  std::unique_ptr<BlockPool> pool = MakePool(5, 2, &alloc);  // blocks 3, 4 reserved
  EXPECT_EQ(pool->num_free(), 3);
  EXPECT_EQ(pool->num_reserved_free(), 2);
  EXPECT_EQ(pool->num_available(false), 3);
  EXPECT_EQ(pool->num_available(true), 5);
  // Others drain the general list and then get nothing, though the reserve is full.
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(pool->is_reserved(*pool->Allocate(false)));
  EXPECT_EQ(pool->Allocate(false), std::nullopt);
  // The dummy gets the reserve.
  const BlockId d0 = *pool->Allocate(true);
  const BlockId d1 = *pool->Allocate(true);
  EXPECT_TRUE(pool->is_reserved(d0));
  EXPECT_TRUE(pool->is_reserved(d1));
  EXPECT_EQ(pool->Allocate(true), std::nullopt);
  // Freed reserve blocks go back to the reserve, not to the general list.
  pool->Unref(d0);
  EXPECT_EQ(pool->num_reserved_free(), 1);
  EXPECT_EQ(pool->Allocate(false), std::nullopt);
  EXPECT_EQ(pool->Allocate(true), d0);
  EXPECT_THAT(Audit(*pool), IsEmpty());
}

TEST(BlockPoolTest, DummyUsesTheGeneralListOnceItsReserveIsUsed) {
  LedgerAllocator alloc;
  std::unique_ptr<BlockPool> pool = MakePool(3, 1, &alloc);
  EXPECT_TRUE(pool->is_reserved(*pool->Allocate(true)));
  const BlockId b = *pool->Allocate(true);
  EXPECT_FALSE(pool->is_reserved(b));
  pool->Unref(b);
  EXPECT_EQ(pool->num_free(), 2);  // back on the general list
  EXPECT_THAT(Audit(*pool), IsEmpty());
}

}  // namespace
}  // namespace lockstep::kv

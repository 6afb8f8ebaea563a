#include "kvcache/kv_pool.h"

#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int kTpb = 4;
const RequestId kDummy(-1);

class KvPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<KvPool> MakePool(int32_t blocks, int32_t reserved = 0, bool reuse = true) {
    KvPool::Options options;
    options.config.layout.tokens_per_block = kTpb;
    options.config.num_blocks = blocks;
    options.config.enable_prefix_reuse = reuse;
    options.reserved_blocks = reserved;
    options.dummy_id = kDummy;
    absl::StatusOr<std::unique_ptr<KvPool>> pool = KvPool::Create(options, &allocator_);
    EXPECT_THAT(pool, IsOk());
    return pool.ok() ? std::move(*pool) : nullptr;
  }

  static absl::Status Resize(KvPool& pool, RequestId id, std::optional<int64_t> capacity,
                             std::optional<int64_t> history) {
    absl::StatusOr<KvPool::ResizePlan> plan = pool.PlanResize(id, capacity, history);
    if (!plan.ok()) return plan.status();
    pool.ApplyResize(*plan);
    return absl::OkStatus();
  }

  // A cache of `id` holding `tokens` as history (all blocks computed), committed.
  static void Compute(KvPool& pool, RequestId id, const std::vector<int32_t>& tokens) {
    KvCache& cache = pool.CreateCache(id, next_generation_++, {}, 0);
    const int64_t n = static_cast<int64_t>(tokens.size());
    ASSERT_THAT(Resize(pool, id, n, n), IsOk());
    pool.Commit(cache, tokens);
  }

  static std::vector<std::string> Audit(const KvPool& pool, absl::flat_hash_set<RequestId> owners) {
    std::vector<std::string> out;
    pool.AuditInto("", owners, &out);
    return out;
  }

  static std::vector<int32_t> Tokens(int n, int first) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
  }

  static std::vector<BlockId> Table(const KvPool& pool, RequestId id) {
    const absl::Span<const BlockId> blocks = pool.Find(id)->blocks();
    return {blocks.begin(), blocks.end()};
  }

  static inline uint64_t next_generation_ = 1;
  HostAllocator allocator_;
};

TEST_F(KvPoolTest, GrowCoversCapacityAndShrinkFreesTailBlocks) {
  std::unique_ptr<KvPool> pool = MakePool(8);
  pool->CreateCache(RequestId(1), 1, {}, 0);
  ASSERT_THAT(Resize(*pool, RequestId(1), 9, 2), IsOk());
  EXPECT_THAT(Table(*pool, RequestId(1)), ElementsAre(BlockId(0), BlockId(1), BlockId(2)));
  EXPECT_EQ(pool->Stats().free_blocks, 5);
  ASSERT_THAT(Resize(*pool, RequestId(1), 4, std::nullopt), IsOk());
  EXPECT_THAT(Table(*pool, RequestId(1)), ElementsAre(BlockId(0)));
  EXPECT_EQ(pool->Stats().free_blocks, 7);
  EXPECT_EQ(pool->Find(RequestId(1))->capacity(), 4);
  EXPECT_THAT(Audit(*pool, {RequestId(1)}), IsEmpty());
}

TEST_F(KvPoolTest, FailedGrowthChangesNothing) {
  std::unique_ptr<KvPool> pool = MakePool(4);
  pool->CreateCache(RequestId(1), 1, {}, 0);
  pool->CreateCache(RequestId(2), 2, {}, 0);
  ASSERT_THAT(Resize(*pool, RequestId(1), 8, 8), IsOk());
  ASSERT_THAT(Resize(*pool, RequestId(2), 4, 1), IsOk());
  const std::vector<BlockId> before = Table(*pool, RequestId(2));
  EXPECT_THAT(Resize(*pool, RequestId(2), 12, 2), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(Table(*pool, RequestId(2)), ElementsAreArray(before));
  EXPECT_EQ(pool->Find(RequestId(2))->capacity(), 4);
  EXPECT_EQ(pool->Find(RequestId(2))->history(), 1);
  EXPECT_EQ(pool->Stats().free_blocks, 1);
  EXPECT_TRUE(pool->CanGrow(RequestId(2), 4));
  EXPECT_FALSE(pool->CanGrow(RequestId(2), 5));
  EXPECT_THAT(Resize(*pool, RequestId(9), 4, 0), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Audit(*pool, {RequestId(1), RequestId(2)}), IsEmpty());
}

TEST_F(KvPoolTest, SharedPrefixSharesBlocksWithRefcounts) {
  std::unique_ptr<KvPool> pool = MakePool(16);
  const std::vector<int32_t> prompt = Tokens(14, 100);  // 3 full blocks + 2 tokens
  Compute(*pool, RequestId(1), prompt);
  const std::vector<BlockId> a = Table(*pool, RequestId(1));
  EXPECT_EQ(pool->Find(RequestId(1))->committed(), 12);
  EXPECT_EQ(pool->tree().num_nodes(), 3);

  // Same prompt: the 3 full blocks are reused (the last token is never covered anyway).
  EXPECT_EQ(pool->ProbeBlocks(prompt, 100), 3);
  KvCache& b = pool->CreateCache(RequestId(2), 9, prompt, 3);
  EXPECT_EQ(b.capacity(), 12);
  EXPECT_EQ(b.history(), 12);
  EXPECT_EQ(b.committed(), 12);
  EXPECT_THAT(Table(*pool, RequestId(2)), ElementsAre(a[0], a[1], a[2]));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pool->ref_count(a[i]), 3) << "A + B + tree pin";
  EXPECT_EQ(pool->ref_count(a[3]), 1) << "A's partial block is private";

  // Growth after the reused prefix takes new private blocks.
  ASSERT_THAT(Resize(*pool, RequestId(2), 16, 13), IsOk());
  EXPECT_NE(Table(*pool, RequestId(2))[3], a[3]);
  EXPECT_THAT(Audit(*pool, {RequestId(1), RequestId(2)}), IsEmpty());

  // Released: published blocks stay cached (reusable), private ones are freed.
  EXPECT_TRUE(pool->Close(RequestId(1)));
  EXPECT_TRUE(pool->Close(RequestId(2)));
  EXPECT_FALSE(pool->Close(RequestId(2)));
  const PoolStats stats = pool->Stats();
  EXPECT_EQ(stats.cached_blocks, 3);
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.free_blocks, 13);
  EXPECT_EQ(pool->ProbeBlocks(prompt, 100), 3);
  EXPECT_THAT(Audit(*pool, {}), IsEmpty());
}

TEST_F(KvPoolTest, EvictsLeastRecentlyReleasedPrefixFirst) {
  std::unique_ptr<KvPool> pool = MakePool(6);
  const std::vector<int32_t> p1 = Tokens(8, 0), p2 = Tokens(8, 100), p3 = Tokens(8, 200);
  Compute(*pool, RequestId(1), p1);
  Compute(*pool, RequestId(2), p2);
  Compute(*pool, RequestId(3), p3);
  pool->Close(RequestId(2));  // released first: evicted first
  pool->Close(RequestId(1));
  pool->Close(RequestId(3));
  EXPECT_EQ(pool->Stats().cached_blocks, 6);
  EXPECT_EQ(pool->Stats().free_blocks, 0);
  // Touch p2 again (reuse then release): now p1 is the oldest.
  pool->CreateCache(RequestId(4), 10, Tokens(9, 100), 2);
  pool->Close(RequestId(4));

  pool->CreateCache(RequestId(5), 11, {}, 0);
  ASSERT_TRUE(pool->CanGrow(RequestId(5), 4));
  ASSERT_THAT(Resize(*pool, RequestId(5), 4, 0), IsOk());  // evicts p1's second block
  EXPECT_EQ(pool->evicted_blocks(), 1);
  EXPECT_EQ(pool->ProbeBlocks(p1, 2), 1);
  EXPECT_EQ(pool->ProbeBlocks(p2, 2), 2);
  EXPECT_EQ(pool->ProbeBlocks(p3, 2), 2);
  ASSERT_THAT(Resize(*pool, RequestId(5), 12, 0), IsOk());  // p1's first block, then p3
  EXPECT_EQ(pool->evicted_blocks(), 3);
  EXPECT_EQ(pool->ProbeBlocks(p1, 2), 0);
  EXPECT_EQ(pool->ProbeBlocks(p3, 2), 1);
  EXPECT_EQ(pool->ProbeBlocks(p2, 2), 2);
  EXPECT_THAT(Audit(*pool, {RequestId(5)}), IsEmpty());
  // Free + evictable: 3 blocks (p2's two, p3's first); 4 more blocks do not fit.
  EXPECT_FALSE(pool->CanGrow(RequestId(5), 13));
  EXPECT_THAT(Resize(*pool, RequestId(5), 28, 0), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(pool->evicted_blocks(), 3);
}

TEST_F(KvPoolTest, DuplicatePrefixStaysPrivate) {
  std::unique_ptr<KvPool> pool = MakePool(8);
  const std::vector<int32_t> prompt = Tokens(8, 7);
  Compute(*pool, RequestId(1), prompt);
  Compute(*pool, RequestId(2), prompt);  // computed without reuse, same tokens
  const KvCache& second = *pool->Find(RequestId(2));
  EXPECT_EQ(second.committed(), 8);
  EXPECT_EQ(second.tree_blocks(), 0);
  EXPECT_TRUE(second.publishing_stopped());
  EXPECT_EQ(pool->tree().num_nodes(), 2);
  EXPECT_THAT(Audit(*pool, {RequestId(1), RequestId(2)}), IsEmpty());
  pool->Close(RequestId(2));
  EXPECT_EQ(pool->Stats().free_blocks, 6);  // its blocks were private: freed, not cached
}

TEST_F(KvPoolTest, CommitStopsAtHistoryAndFullBlocks) {
  std::unique_ptr<KvPool> pool = MakePool(8);
  KvCache& cache = pool->CreateCache(RequestId(1), 1, {}, 0);
  ASSERT_THAT(Resize(*pool, RequestId(1), 16, 10), IsOk());
  pool->Commit(cache, Tokens(16, 0));  // only history (10 tokens) counts: 2 full blocks
  EXPECT_EQ(cache.committed(), 8);
  EXPECT_EQ(cache.tree_blocks(), 2);
  ASSERT_THAT(Resize(*pool, RequestId(1), std::nullopt, 16), IsOk());
  pool->Commit(cache, Tokens(16, 0));
  EXPECT_EQ(cache.committed(), 16);
  EXPECT_EQ(cache.tree_blocks(), 4);
  EXPECT_EQ(pool->ProbeBlocks(Tokens(16, 0), 4), 4);
  EXPECT_THAT(Audit(*pool, {RequestId(1)}), IsEmpty());
}

TEST_F(KvPoolTest, ReuseOffNeverPublishes) {
  std::unique_ptr<KvPool> pool = MakePool(8, 0, /*reuse=*/false);
  Compute(*pool, RequestId(1), Tokens(8, 0));
  EXPECT_EQ(pool->Find(RequestId(1))->committed(), 8);
  EXPECT_EQ(pool->tree().num_nodes(), 0);
  EXPECT_EQ(pool->ProbeBlocks(Tokens(9, 0), 2), 0);
  pool->Close(RequestId(1));
  EXPECT_EQ(pool->Stats().free_blocks, 8);
}

TEST_F(KvPoolTest, DummyUsesItsReserveAndNeverPublishes) {
  std::unique_ptr<KvPool> pool = MakePool(6, 2);
  pool->CreateCache(RequestId(1), 1, {}, 0);
  ASSERT_THAT(Resize(*pool, RequestId(1), 16, 0), IsOk());  // the whole general list
  EXPECT_FALSE(pool->CanGrow(RequestId(1), 1));
  EXPECT_TRUE(pool->CanGrow(kDummy, 8));
  EXPECT_FALSE(pool->CanGrow(kDummy, 9));
  KvCache& dummy = pool->CreateCache(kDummy, 2, {}, 0);
  ASSERT_THAT(Resize(*pool, kDummy, 8, 8), IsOk());
  EXPECT_THAT(Table(*pool, kDummy), ElementsAre(BlockId(4), BlockId(5)));
  pool->Commit(dummy, Tokens(8, 0));
  EXPECT_EQ(pool->tree().num_nodes(), 0);
  EXPECT_THAT(Audit(*pool, {RequestId(1), kDummy}), IsEmpty());
  pool->Close(kDummy);
  EXPECT_EQ(pool->Stats().reserved_blocks, 2);
}

TEST_F(KvPoolTest, AuditNamesAnUnownedCache) {
  std::unique_ptr<KvPool> pool = MakePool(4);
  pool->CreateCache(RequestId(3), 1, {}, 0);
  EXPECT_THAT(Audit(*pool, {RequestId(3)}), IsEmpty());
  EXPECT_THAT(Audit(*pool, {}),
              ElementsAre(::testing::HasSubstr("request 3 (generation 1): cache is owned by no")));
  EXPECT_THAT(pool->Ids(), ElementsAre(RequestId(3)));
}

}  // namespace
}  // namespace lockstep::kv

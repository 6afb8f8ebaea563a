#include "kvcache/kv_cache.h"

#include <optional>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::Eq;

KvCache MakeCache(int64_t capacity, int64_t history, int64_t committed = 0) {
  KvCache cache;
  cache.Reset(RequestId(7), /*generation=*/3);
  cache.SetLengths({.capacity = capacity, .history = history});
  cache.RaiseCommitted(committed);
  return cache;
}

TEST(KvCacheTest, FreshCacheIsActiveAndEmpty) {
  KvCache cache;
  cache.Reset(RequestId(5), 11);
  const CacheInfo info = cache.Info();
  EXPECT_EQ(info.generation, 11u);
  EXPECT_EQ(info.committed, 0);
  EXPECT_EQ(info.history, 0);
  EXPECT_EQ(info.capacity, 0);
  EXPECT_EQ(info.status, CacheStatus::kActive);
  EXPECT_EQ(cache.num_blocks(), 0);
}

TEST(KvCacheTest, HistoryCannotDecreaseExactMessage) {
  const KvCache cache = MakeCache(8, 5);
  EXPECT_THAT(cache.ResolveResize(std::nullopt, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot decrease")));
  // Checked before capacity: a shrink below the old history reports the decrease.
  EXPECT_THAT(cache.ResolveResize(2, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot decrease")));
}

TEST(KvCacheTest, HistoryCannotExceedCapacityExactMessage) {
  const KvCache cache = MakeCache(8, 5);
  EXPECT_THAT(
      cache.ResolveResize(std::nullopt, 9),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
  EXPECT_THAT(
      cache.ResolveResize(4, std::nullopt),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
  // The motivating failure's shape: a capacity-0 cache asked for history 3.
  const KvCache mirror = MakeCache(0, 0);
  EXPECT_THAT(
      mirror.ResolveResize(std::nullopt, 3),
      StatusIs(absl::StatusCode::kInvalidArgument, Eq("history length cannot exceed capacity")));
}

TEST(KvCacheTest, NulloptKeepsALength) {
  const KvCache cache = MakeCache(8, 5);
  absl::StatusOr<KvCache::Lengths> grow = cache.ResolveResize(12, std::nullopt);
  ASSERT_THAT(grow, IsOk());
  EXPECT_EQ(grow->capacity, 12);
  EXPECT_EQ(grow->history, 5);
  absl::StatusOr<KvCache::Lengths> same = cache.ResolveResize(std::nullopt, std::nullopt);
  ASSERT_THAT(same, IsOk());
  EXPECT_EQ(same->capacity, 8);
  EXPECT_EQ(same->history, 5);
  absl::StatusOr<KvCache::Lengths> shrink = cache.ResolveResize(5, 5);
  ASSERT_THAT(shrink, IsOk());
  EXPECT_EQ(shrink->capacity, 5);
}

TEST(KvCacheTest, OnlyActiveCachesResize) {
  KvCache cache = MakeCache(8, 5);
  cache.set_status(CacheStatus::kSuspended);
  EXPECT_THAT(cache.ResolveResize(9, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  cache.set_status(CacheStatus::kClosed);
  EXPECT_THAT(cache.ResolveResize(9, std::nullopt),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(KvCacheTest, CommittedOnlyRisesAndResetClearsEverything) {
  KvCache cache = MakeCache(16, 12, 4);
  cache.RaiseCommitted(8);
  EXPECT_EQ(cache.committed(), 8);
  cache.RaiseCommitted(4);
  EXPECT_EQ(cache.committed(), 8);
  cache.PushBlock(BlockId(3));
  cache.AddTreeBlock();
  cache.StopPublishing();
  cache.Reset(RequestId(9), 4);
  EXPECT_EQ(cache.id(), RequestId(9));
  EXPECT_EQ(cache.committed(), 0);
  EXPECT_EQ(cache.num_blocks(), 0);
  EXPECT_EQ(cache.tree_blocks(), 0);
  EXPECT_FALSE(cache.publishing_stopped());
}

}  // namespace
}  // namespace lockstep::kv

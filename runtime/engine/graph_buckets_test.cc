#include "runtime/engine/graph_buckets.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

GraphBuckets PlanOk(int64_t max_batch_size, int k, std::vector<int64_t> configured = {}) {
  absl::StatusOr<GraphBuckets> buckets = GraphBuckets::Plan(max_batch_size, k, configured);
  EXPECT_THAT(buckets, IsOk());
  return *std::move(buckets);
}

TEST(GraphBucketsTest, DefaultsForSmallBatches) {
  EXPECT_THAT(PlanOk(1, 0).sizes(), ElementsAre(1));
  EXPECT_THAT(PlanOk(4, 0).sizes(), ElementsAre(1, 2, 4));
  // K = 3: up to 4 * 4 = 16 rows.
  EXPECT_THAT(PlanOk(4, 3).sizes(), ElementsAre(1, 2, 4, 8, 16));
  EXPECT_THAT(PlanOk(3, 2).sizes(), ElementsAre(1, 2, 4, 8, 9));
  EXPECT_EQ(PlanOk(3, 2).max_rows(), 9);
}

TEST(GraphBucketsTest, DefaultsForLargeBatches) {
  // 64 * 5 = 320 rows: every 8 up to 256, then 320.
  const GraphBuckets buckets = PlanOk(64, 4);
  const std::vector<int64_t>& sizes = buckets.sizes();
  EXPECT_EQ(sizes.size(), 3u + 32u + 1u);
  EXPECT_EQ(sizes[3], 8);
  EXPECT_EQ(sizes[34], 256);
  EXPECT_EQ(sizes.back(), 320);
  // 256 * 3 = 768: 256, then every 64 from 320, and 768 itself.
  const GraphBuckets large = PlanOk(256, 2);
  EXPECT_EQ(large.sizes().back(), 768);
  EXPECT_EQ(large.sizes()[large.sizes().size() - 2], 704);
  EXPECT_EQ(large.BucketFor(257), 320);
}

TEST(GraphBucketsTest, ConfiguredSizesAreSortedWithoutRepeats) {
  EXPECT_THAT(PlanOk(8, 1, {16, 1, 4, 4}).sizes(), ElementsAre(1, 4, 16));
}

TEST(GraphBucketsTest, RejectsBadInput) {
  EXPECT_THAT(GraphBuckets::Plan(8, 1, std::vector<int64_t>{4, 17}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("graph_batch_sizes[1] must be in [1, 16]")));
  EXPECT_THAT(GraphBuckets::Plan(8, 1, std::vector<int64_t>{0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("graph_batch_sizes[0]")));
  EXPECT_THAT(GraphBuckets::Plan(0, 1, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch_size")));
  EXPECT_THAT(GraphBuckets::Plan(8, -1, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_draft_tokens")));
}

TEST(GraphBucketsTest, MapsRowsToTheSmallestBucketThatHoldsThem) {
  const GraphBuckets buckets = PlanOk(8, 1, {2, 6, 12});
  EXPECT_EQ(buckets.BucketFor(1), 2);
  EXPECT_EQ(buckets.BucketFor(2), 2);
  EXPECT_EQ(buckets.BucketFor(3), 6);
  EXPECT_EQ(buckets.BucketFor(12), 12);
  EXPECT_EQ(buckets.BucketFor(13), std::nullopt);  // beyond the largest: eager
  EXPECT_EQ(buckets.BucketFor(0), 2);
  EXPECT_EQ(buckets.dummy_bucket(), 2);  // 1 + K = 2 rows
}

TEST(GraphBucketsTest, TheDummysBucketHoldsItsOnePlusKRows) {
  EXPECT_EQ(PlanOk(8, 0).dummy_bucket(), 1);
  EXPECT_EQ(PlanOk(8, 3).dummy_bucket(), 4);
  EXPECT_EQ(PlanOk(8, 2).dummy_bucket(), 4);  // buckets 1, 2, 4, 8, ...
  EXPECT_EQ(PlanOk(8, 3, {2, 6, 32}).dummy_bucket(), 6);
  EXPECT_EQ(PlanOk(8, 3, {1, 2}).dummy_bucket(), 2);  // none holds it: the largest
}

// Without exchanges every rank replays its own rows' bucket; with them the exchange
// capacity follows the vote, and a rank whose rows fit the dummy's bucket computes
// only that bucket.
TEST(GraphBucketsTest, GraphsFollowTheVoteOnlyForTheExchanges) {
  const GraphBuckets buckets = PlanOk(8, 3, {1, 4, 8, 32});  // dummy: 4 rows
  EXPECT_THAT(buckets.Graphs(false),
              ElementsAre(GraphKey{1, 0}, GraphKey{4, 0}, GraphKey{8, 0}, GraphKey{32, 0}));
  EXPECT_THAT(buckets.Graphs(true), ElementsAre(GraphKey{1, 1}, GraphKey{4, 4}, GraphKey{8, 8},
                                                GraphKey{32, 32}, GraphKey{4, 8}, GraphKey{4, 32}));
  EXPECT_EQ(buckets.GraphFor(4, 20, false), (GraphKey{4, 0}));
  EXPECT_EQ(buckets.GraphFor(20, 20, false), (GraphKey{32, 0}));
  EXPECT_EQ(buckets.GraphFor(4, 20, true), (GraphKey{4, 32}));  // a dummy-only rank
  EXPECT_EQ(buckets.GraphFor(1, 4, true), (GraphKey{4, 4}));
  EXPECT_EQ(buckets.GraphFor(5, 20, true), (GraphKey{32, 32}));
  EXPECT_EQ(buckets.GraphFor(20, 20, true), (GraphKey{32, 32}));
  EXPECT_EQ(buckets.GraphFor(8, 3, true), (GraphKey{8, 8}));  // never below its own rows
  EXPECT_EQ(buckets.GraphFor(4, 33, true), std::nullopt);     // eager everywhere
  EXPECT_EQ(buckets.GraphFor(33, 33, false), std::nullopt);
}

// For random plans: the buckets are sorted, unique, within [1, max_rows]; the default
// plan ends at max_rows, so every step up to max_rows replays a graph; and BucketFor
// is the smallest bucket that holds the rows.
TEST(GraphBucketsTest, RandomPlansHoldTheirInvariants) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t max_batch_size = 1 + static_cast<int64_t>(rng() % 300);
    const int k = static_cast<int>(rng() % 9);
    const int64_t max_rows = max_batch_size * (1 + k);
    std::vector<int64_t> configured;
    if (rng() % 2 == 0) {
      const int n = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) configured.push_back(1 + static_cast<int64_t>(rng() % max_rows));
    }
    const GraphBuckets buckets = PlanOk(max_batch_size, k, configured);
    const std::vector<int64_t>& sizes = buckets.sizes();
    ASSERT_FALSE(sizes.empty());
    EXPECT_TRUE(std::is_sorted(sizes.begin(), sizes.end()));
    EXPECT_EQ(std::adjacent_find(sizes.begin(), sizes.end()), sizes.end());
    EXPECT_GE(sizes.front(), 1);
    EXPECT_LE(sizes.back(), max_rows);
    if (configured.empty()) {
      EXPECT_EQ(sizes.back(), max_rows);
      EXPECT_EQ(sizes.front(), 1);
    }
    EXPECT_EQ(buckets.dummy_bucket(), buckets.BucketFor(1 + k).value_or(sizes.back()));
    const std::vector<GraphKey> with = buckets.Graphs(true);
    const std::vector<GraphKey> without = buckets.Graphs(false);
    for (int probe = 0; probe < 20; ++probe) {
      const int64_t rows = 1 + static_cast<int64_t>(rng() % (max_rows + 2));
      const std::optional<int64_t> bucket = buckets.BucketFor(rows);
      if (rows > sizes.back()) {
        EXPECT_EQ(bucket, std::nullopt) << rows;
        continue;
      }
      ASSERT_TRUE(bucket.has_value()) << rows;
      EXPECT_GE(*bucket, rows);
      EXPECT_NE(std::find(sizes.begin(), sizes.end(), *bucket), sizes.end());
      for (int64_t size : sizes) {
        if (size >= rows) EXPECT_GE(size, *bucket) << "a smaller bucket holds " << rows;
      }
      // Two ranks of one step: the graphs hold their rows, come from the capture
      // list, and (with exchanges) carry the same capacity.
      const int64_t other = 1 + static_cast<int64_t>(rng() % *bucket);
      const int64_t agreed = std::max(rows, other);
      const std::optional<GraphKey> mine = buckets.GraphFor(rows, agreed, true);
      const std::optional<GraphKey> theirs = buckets.GraphFor(other, agreed, true);
      ASSERT_TRUE(mine.has_value() && theirs.has_value()) << rows << ", " << other;
      EXPECT_EQ(mine->exchange_rows, theirs->exchange_rows);
      EXPECT_EQ(mine->exchange_rows, bucket);
      EXPECT_GE(mine->rows, rows);
      EXPECT_GE(theirs->rows, other);
      EXPECT_NE(std::find(with.begin(), with.end(), *mine), with.end());
      EXPECT_NE(std::find(with.begin(), with.end(), *theirs), with.end());
      const std::optional<GraphKey> alone = buckets.GraphFor(rows, agreed, false);
      ASSERT_TRUE(alone.has_value());
      EXPECT_EQ(*alone, (GraphKey{*bucket, 0}));
      EXPECT_NE(std::find(without.begin(), without.end(), *alone), without.end());
    }
  }
}

}  // namespace
}  // namespace lockstep::engine

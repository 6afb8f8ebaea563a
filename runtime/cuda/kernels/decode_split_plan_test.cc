#include "runtime/cuda/kernels/decode_split_plan.h"

#include <cstdint>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;

// Every position of [0, len) is in exactly one split, splits in order, none empty.
void ExpectCovers(const DecodeRowDesc& row) {
  int64_t next = 0;
  for (int32_t s = 0; s < row.num_splits; ++s) {
    const int64_t begin = static_cast<int64_t>(s) * row.split_tokens;
    const int64_t end = std::min<int64_t>(row.context_len, begin + row.split_tokens);
    ASSERT_EQ(begin, next);
    ASSERT_LT(begin, end) << "split " << s << " is empty";
    next = end;
  }
  EXPECT_EQ(next, row.context_len);
}

TEST(DecodeSplitPlanTest, EdgeLengths) {
  const DecodeSplitOptions options{.split_tokens = 256, .max_splits = 8};
  EXPECT_EQ(SplitShapeForLength(1, options).num_splits, 1);
  EXPECT_EQ(SplitShapeForLength(256, options).num_splits, 1);
  EXPECT_EQ(SplitShapeForLength(257, options).num_splits, 2);
  // 8k context: 32 base splits, capped to 8 splits of 4 x 256 tokens.
  const RowSplitShape long_shape = SplitShapeForLength(8192, options);
  EXPECT_EQ(long_shape.num_splits, 8);
  EXPECT_EQ(long_shape.split_tokens, 1024);
  // One block plus one token with 16-token blocks and 16-token splits.
  const RowSplitShape small = SplitShapeForLength(17, {.split_tokens = 16, .max_splits = 8});
  EXPECT_EQ(small.num_splits, 2);
}

TEST(DecodeSplitPlanTest, RejectsBadInput) {
  EXPECT_THAT(PlanDecodeSplits(std::vector<int64_t>{0}, std::vector<int32_t>{0}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanDecodeSplits(std::vector<int64_t>{5}, std::vector<int32_t>{}, {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      PlanDecodeSplits(std::vector<int64_t>{5}, std::vector<int32_t>{0}, {.split_tokens = 0})
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

// Random batches: every row covered, the cap held, slots contiguous, and each row's
// shape the same as when it is planned alone (batch invariance).
TEST(DecodeSplitPlanTest, RandomBatchesAreBatchInvariant) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const DecodeSplitOptions options{.split_tokens = 16 << (rng() % 5),
                                     .max_splits = 1 + static_cast<int>(rng() % 64)};
    const int rows = 1 + static_cast<int>(rng() % 64);
    std::vector<int64_t> lens(rows);
    std::vector<int32_t> seqs(rows);
    for (int r = 0; r < rows; ++r) {
      lens[r] = 1 + static_cast<int64_t>(rng() % (rng() % 2 ? 40 : 9000));
      seqs[r] = static_cast<int32_t>(rng() % 16);
    }
    absl::StatusOr<DecodeSplitPlan> plan = PlanDecodeSplits(lens, seqs, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->rows.size(), lens.size());
    int32_t slot = 0;
    size_t item = 0;
    for (int r = 0; r < rows; ++r) {
      const DecodeRowDesc& row = plan->rows[r];
      EXPECT_EQ(row.seq, seqs[r]);
      EXPECT_EQ(row.context_len, lens[r]);
      EXPECT_EQ(row.split_begin, slot);
      EXPECT_EQ(row.qo_row, r);
      EXPECT_LE(row.num_splits, options.max_splits);
      EXPECT_EQ(row.split_tokens % options.split_tokens, 0);
      ExpectCovers(row);
      absl::StatusOr<DecodeSplitPlan> alone =
          PlanDecodeSplits(std::vector<int64_t>{lens[r]}, std::vector<int32_t>{0}, options);
      ASSERT_TRUE(alone.ok());
      EXPECT_EQ(alone->rows[0].num_splits, row.num_splits);
      EXPECT_EQ(alone->rows[0].split_tokens, row.split_tokens);
      for (int32_t s = 0; s < row.num_splits; ++s, ++item) {
        ASSERT_LT(item, plan->items.size());
        EXPECT_EQ(plan->items[item].row, r);
        EXPECT_EQ(plan->items[item].split, s);
      }
      slot += row.num_splits;
    }
    EXPECT_EQ(item, plan->items.size());
    EXPECT_EQ(plan->total_splits(), slot);
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

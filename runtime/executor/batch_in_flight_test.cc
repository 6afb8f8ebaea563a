#include "runtime/executor/batch_in_flight.h"

#include "gtest/gtest.h"

namespace lockstep::exec {
namespace {

constexpr kv::PoolKind kTarget = kv::PoolKind::kTarget;
constexpr kv::PoolKind kDraft = kv::PoolKind::kDraft;
constexpr RequestId kA(1), kB(2);

TEST(BatchInFlightTest, TheDeferralTable) {
  // Every rank forwards: processed, whatever this rank had.
  EXPECT_TRUE(BatchInFlight::ProcessPrevious(/*can_queue=*/true, /*local_nonempty=*/true));
  EXPECT_TRUE(BatchInFlight::ProcessPrevious(/*can_queue=*/true, /*local_nonempty=*/false));
  // Nobody forwards and this rank had nothing: processed.
  EXPECT_TRUE(BatchInFlight::ProcessPrevious(/*can_queue=*/false, /*local_nonempty=*/false));
  // The fleet vetoed while this rank had a batch: deferred.
  EXPECT_FALSE(BatchInFlight::ProcessPrevious(/*can_queue=*/false, /*local_nonempty=*/true));
}

TEST(BatchInFlightTest, HoldsOneBatchUntilCleared) {
  BatchInFlight in_flight;
  EXPECT_FALSE(in_flight.has_value());
  EXPECT_EQ(in_flight.OldestRunningStep(8), 8);
  in_flight.Hold(InFlightBatch{StepId(5), {InFlightEntry{.id = kA}}});
  ASSERT_TRUE(in_flight.has_value());
  EXPECT_EQ(in_flight.batch().step, StepId(5));
  EXPECT_EQ(in_flight.batch().entries.size(), 1u);
  EXPECT_EQ(in_flight.OldestRunningStep(8), 5);
  in_flight.Clear();
  EXPECT_FALSE(in_flight.has_value());
  EXPECT_EQ(in_flight.OldestRunningStep(9), 9);
}

TEST(BatchInFlightTest, GrantsCountOnlyForTheCacheTheyWereMadeFor) {
  BatchInFlight in_flight;
  EXPECT_EQ(in_flight.Granted(kA, kTarget, 1), 0);
  InFlightBatch batch{StepId(3), {}};
  batch.entries.push_back(InFlightEntry{.id = kA,
                                        .target_generation = 1,
                                        .draft_generation = 2,
                                        .target_grant = 4,
                                        .draft_grant = 6});
  // A second sequence of the same cache in one batch (a context chunk, then a step).
  batch.entries.push_back(InFlightEntry{.id = kA, .target_generation = 1, .target_grant = 3});
  batch.entries.push_back(InFlightEntry{.id = kB, .target_generation = 7, .target_grant = 9});
  in_flight.Hold(std::move(batch));
  EXPECT_EQ(in_flight.Granted(kA, kTarget, 1), 7);
  EXPECT_EQ(in_flight.Granted(kA, kDraft, 2), 6);
  EXPECT_EQ(in_flight.Granted(kA, kTarget, 2), 0);  // a newer cache under the same id
  EXPECT_EQ(in_flight.Granted(kB, kTarget, 7), 9);
  EXPECT_EQ(in_flight.Granted(kB, kDraft, 7), 0);
}

}  // namespace
}  // namespace lockstep::exec

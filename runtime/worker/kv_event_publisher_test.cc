#include "runtime/worker/kv_event_publisher.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

KvEventPublisher::Options Opts(size_t max_pending_keys = 1 << 20) {
  return {.instance = "agg0",
          .world_size = 2,
          .incarnation = 77,
          .hash_salt = 5,
          .tokens_per_block = 16,
          .max_pending_keys = max_pending_keys};
}

std::vector<kv::KvEventDelta> Deltas(kv::KvEventDelta rank0, kv::KvEventDelta rank1) {
  return {std::move(rank0), std::move(rank1)};
}

TEST(KvEventPublisherTest, NumbersEachRanksNonEmptyDeltas) {
  KvEventPublisher p(Opts());
  EXPECT_FALSE(p.TakeReport().has_value());
  p.OnKvEvents(Deltas({.committed = {1, 2}}, {}));
  p.OnKvEvents(Deltas({.committed = {3}, .evicted = {1}}, {.committed = {9}}));
  std::optional<v1::ReportKvEventsRequest> r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->instance(), "agg0");
  EXPECT_EQ(r->incarnation(), 77u);
  EXPECT_EQ(r->hash_salt(), 5u);
  EXPECT_EQ(r->tokens_per_block(), 16);
  EXPECT_EQ(r->snapshots_size(), 0);
  ASSERT_EQ(r->batches_size(), 3);
  EXPECT_EQ(r->batches(0).rank(), 0);
  EXPECT_EQ(r->batches(0).seq(), 1u);
  EXPECT_EQ(r->batches(1).rank(), 0);
  EXPECT_EQ(r->batches(1).seq(), 2u);
  EXPECT_THAT(r->batches(1).committed(), ElementsAre(3));
  EXPECT_THAT(r->batches(1).evicted(), ElementsAre(1));
  EXPECT_EQ(r->batches(2).rank(), 1);
  EXPECT_EQ(r->batches(2).seq(), 1u);  // rank 1's empty delta got no number
  EXPECT_FALSE(p.TakeReport().has_value());
}

TEST(KvEventPublisherTest, SnapshotsComeFromTheMirrorWhenAskedOrAfterAFailure) {
  KvEventPublisher p(Opts());
  p.OnKvEvents(Deltas({.committed = {1, 2, 3}}, {.committed = {8}}));
  p.OnKvEvents(Deltas({.evicted = {2}}, {}));
  std::optional<v1::ReportKvEventsRequest> sent = p.TakeReport();
  ASSERT_TRUE(sent.has_value());
  v1::ReportKvEventsResponse answer;
  answer.add_snapshot_ranks(0);
  p.OnResponse(answer);
  p.OnKvEvents(Deltas({.committed = {4}}, {.committed = {9}}));  // rank 0's batch 3 is covered
  std::optional<v1::ReportKvEventsRequest> r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->snapshots_size(), 1);
  EXPECT_EQ(r->snapshots(0).rank(), 0);
  EXPECT_EQ(r->snapshots(0).seq(), 3u);
  EXPECT_THAT(r->snapshots(0).keys(), UnorderedElementsAre(1, 3, 4));
  ASSERT_EQ(r->batches_size(), 1);
  EXPECT_EQ(r->batches(0).rank(), 1);
  EXPECT_EQ(r->batches(0).seq(), 2u);

  // A report that did not arrive: its ranks send snapshots next, then batches go on.
  p.OnSendFailed(*r);
  p.OnKvEvents(Deltas({}, {.evicted = {8}}));
  r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->snapshots_size(), 2);
  EXPECT_EQ(r->batches_size(), 0);
  EXPECT_EQ(r->snapshots(1).rank(), 1);
  EXPECT_EQ(r->snapshots(1).seq(), 3u);
  EXPECT_THAT(r->snapshots(1).keys(), ElementsAre(9));
  p.OnKvEvents(Deltas({.committed = {5}}, {}));
  r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->batches_size(), 1);
  EXPECT_EQ(r->batches(0).seq(), 4u);
}

// Each tier's keys travel in the batch, and the mirror keeps them per tier for
// snapshots.
TEST(KvEventPublisherTest, TheTiersTravelInBatchesAndSnapshots) {
  KvEventPublisher p(Opts());
  p.OnKvEvents(
      Deltas({.committed = {1, 2}, .host = {.stored = {1, 5}}, .disk = {.stored = {6}}}, {}));
  p.OnKvEvents(Deltas({.evicted = {1},
                       .host = {.stored = {7}, .removed = {5}},
                       .disk = {.stored = {5}, .removed = {6}}},
                      {}));
  std::optional<v1::ReportKvEventsRequest> r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->batches_size(), 2);
  EXPECT_THAT(r->batches(0).host_stored(), ElementsAre(1, 5));
  EXPECT_THAT(r->batches(0).disk_stored(), ElementsAre(6));
  EXPECT_THAT(r->batches(1).host_stored(), ElementsAre(7));
  EXPECT_THAT(r->batches(1).host_removed(), ElementsAre(5));
  EXPECT_THAT(r->batches(1).disk_stored(), ElementsAre(5));
  EXPECT_THAT(r->batches(1).disk_removed(), ElementsAre(6));
  p.OnSendFailed(*r);
  r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->snapshots_size(), 1);
  EXPECT_THAT(r->snapshots(0).keys(), ElementsAre(2));
  EXPECT_THAT(r->snapshots(0).host_keys(), UnorderedElementsAre(1, 7));
  EXPECT_THAT(r->snapshots(0).disk_keys(), ElementsAre(5));
  // A delta of lower tiers alone is a batch too.
  p.OnKvEvents(Deltas({}, {.host = {.stored = {9}}}));
  r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->batches_size(), 1);
  EXPECT_EQ(r->batches(0).rank(), 1);
  EXPECT_THAT(r->batches(0).host_stored(), ElementsAre(9));
}

TEST(KvEventPublisherTest, TooManyPendingKeysTurnIntoSnapshots) {
  KvEventPublisher p(Opts(/*max_pending_keys=*/4));
  p.OnKvEvents(Deltas({.committed = {1, 2}}, {.committed = {7}}));
  p.OnKvEvents(Deltas({.committed = {3, 4}}, {}));  // 5 keys wait: over the bound
  std::optional<v1::ReportKvEventsRequest> r = p.TakeReport();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->batches_size(), 0);
  ASSERT_EQ(r->snapshots_size(), 2);
  EXPECT_THAT(r->snapshots(0).keys(), UnorderedElementsAre(1, 2, 3, 4));
  EXPECT_EQ(r->snapshots(0).seq(), 2u);
  EXPECT_THAT(r->snapshots(1).keys(), ElementsAre(7));
  EXPECT_EQ(p.seq(1), 1u);
}

}  // namespace
}  // namespace lockstep::worker

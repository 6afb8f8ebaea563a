#include "runtime/worker/draft_stats.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const spec::SpeculativeConfig kNgramDynamic{
    .method = spec::Method::kNgram, .num_draft_tokens = 4, .dynamic = true};

TEST(DraftStatsTest, StatsCarryTheMethodsDraftsAndTheStepsByKUpToTheLargestK) {
  exec::ExecutorCounters c;
  c.drafts_proposed = 40;
  c.drafts_accepted = 25;
  c.draft_k_steps[0] = 2;
  c.draft_k_steps[2] = 5;
  c.draft_k_steps[4] = 6;
  v1::StatsResponse out;
  SetDraftStats(kNgramDynamic, c, &out);
  ASSERT_EQ(out.drafts_by_method_size(), 1);
  EXPECT_EQ(out.drafts_by_method(0).method(), "ngram");
  EXPECT_EQ(out.drafts_by_method(0).proposed(), 40);
  EXPECT_EQ(out.drafts_by_method(0).accepted(), 25);
  EXPECT_THAT(out.draft_k_steps(), ElementsAre(2, 0, 5, 0, 6));
}

// The gauge of requests by their current K covers 0 to the instance's K, so a K that
// holds no request reads 0 rather than disappearing.
TEST(DraftStatsTest, RequestsByCurrentKFromZeroToTheInstancesK) {
  exec::ExecutorCounters c;
  v1::StatsResponse idle;
  SetDraftStats(kNgramDynamic, c, &idle);
  EXPECT_THAT(idle.draft_k_requests(), ElementsAre(0, 0, 0, 0, 0));
  c.draft_k_requests[1] = 3;
  c.draft_k_requests[4] = 5;
  v1::StatsResponse out;
  SetDraftStats(kNgramDynamic, c, &out);
  EXPECT_THAT(out.draft_k_requests(), ElementsAre(0, 3, 0, 0, 5));
}

TEST(DraftStatsTest, WithoutSpeculationNoMethodAndEveryStepAtKZero) {
  exec::ExecutorCounters c;
  v1::StatsResponse idle;
  SetDraftStats(spec::SpeculativeConfig(), c, &idle);
  EXPECT_THAT(idle.drafts_by_method(), IsEmpty());
  EXPECT_THAT(idle.draft_k_steps(), IsEmpty());
  EXPECT_THAT(idle.draft_k_requests(), ElementsAre(0));
  c.draft_k_steps[0] = 9;
  c.draft_k_requests[0] = 2;
  v1::StatsResponse out;
  SetDraftStats(spec::SpeculativeConfig(), c, &out);
  EXPECT_THAT(out.drafts_by_method(), IsEmpty());
  EXPECT_THAT(out.draft_k_steps(), ElementsAre(9));
  EXPECT_THAT(out.draft_k_requests(), ElementsAre(2));
}

// Acceptance by position: from the first position up to the last one proposed (the
// counts' unused index 0 is not sent); nothing before a draft was verified.
TEST(DraftStatsTest, AcceptanceByPositionUpToTheLastProposed) {
  const spec::SpeculativeConfig mtp{.method = spec::Method::kMtp, .num_draft_tokens = 3};
  exec::ExecutorCounters c;
  v1::StatsResponse idle;
  SetDraftStats(mtp, c, &idle);
  EXPECT_THAT(idle.draft_position_proposed(), IsEmpty());
  EXPECT_THAT(idle.draft_position_accepted(), IsEmpty());
  c.draft_position_proposed[1] = 10;
  c.draft_position_proposed[2] = 10;
  c.draft_position_accepted[1] = 7;
  c.draft_position_accepted[2] = 4;
  v1::StatsResponse out;
  SetDraftStats(mtp, c, &out);
  EXPECT_THAT(out.draft_position_proposed(), ElementsAre(10, 10));
  EXPECT_THAT(out.draft_position_accepted(), ElementsAre(7, 4));
  EXPECT_EQ(out.drafts_by_method(0).method(), "mtp");
}

TEST(DraftStatsTest, ARequestsDraftsOnceItProposedAny) {
  exec::Response r;
  v1::GenerateResponse none;
  SetRequestDrafts(spec::Method::kDraftModel, r, &none);
  EXPECT_FALSE(none.has_drafts());
  r.drafts_proposed = 12;
  r.drafts_accepted = 7;
  v1::GenerateResponse out;
  SetRequestDrafts(spec::Method::kDraftModel, r, &out);
  ASSERT_TRUE(out.has_drafts());
  EXPECT_EQ(out.drafts().method(), "draft_model");
  EXPECT_EQ(out.drafts().proposed(), 12);
  EXPECT_EQ(out.drafts().accepted(), 7);
}

}  // namespace
}  // namespace lockstep::worker

#include "tools/bench/request_drafts.h"

#include "gtest/gtest.h"

namespace lockstep::bench {
namespace {

// The lines as RouterMetrics renders its per-request acceptance histogram.
constexpr char kBefore[] = R"(# HELP lockstep_router_request_draft_acceptance Accepted over proposed.
# TYPE lockstep_router_request_draft_acceptance histogram
lockstep_router_request_draft_acceptance_bucket{method="ngram",le="0.1"} 0
lockstep_router_request_draft_acceptance_bucket{method="ngram",le="+Inf"} 2
lockstep_router_request_draft_acceptance_sum{method="ngram"} 1.25
lockstep_router_request_draft_acceptance_count{method="ngram"} 2
lockstep_router_requests_total{outcome="ok"} 9
)";

constexpr char kAfter[] = R"(lockstep_router_request_draft_acceptance_sum{method="draft_model"} 0.5
lockstep_router_request_draft_acceptance_count{method="draft_model"} 1
lockstep_router_request_draft_acceptance_sum{method="ngram"} 3.75
lockstep_router_request_draft_acceptance_count{method="ngram"} 6
)";

TEST(RequestDraftsTest, ParsesCountAndSumByMethod) {
  const std::map<std::string, RequestDrafts> parsed = ParseRequestDrafts(kBefore);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed.at("ngram").requests, 2);
  EXPECT_DOUBLE_EQ(parsed.at("ngram").acceptance_sum, 1.25);
  EXPECT_TRUE(ParseRequestDrafts("lockstep_router_requests_total 3\n").empty());
}

TEST(RequestDraftsTest, TheRunIsTheChangeOfEachMethod) {
  const std::map<std::string, RequestDrafts> run =
      RequestDraftsSince(ParseRequestDrafts(kAfter), ParseRequestDrafts(kBefore));
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(run.at("ngram").requests, 4);
  EXPECT_DOUBLE_EQ(run.at("ngram").acceptance_sum, 2.5);
  EXPECT_EQ(run.at("draft_model").requests, 1);
  // A method with no new request is left out.
  EXPECT_TRUE(RequestDraftsSince(ParseRequestDrafts(kBefore), ParseRequestDrafts(kBefore)).empty());
}

}  // namespace
}  // namespace lockstep::bench

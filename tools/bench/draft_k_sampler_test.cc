#include "tools/bench/draft_k_sampler.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/bench_report.h"

namespace lockstep::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::map<std::string, InstanceDelta> Read(std::vector<int64_t> agg0, std::vector<int64_t> agg1) {
  std::map<std::string, InstanceDelta> read;
  read["agg0"].draft_k_requests = std::move(agg0);
  read["agg1"].draft_k_requests = std::move(agg1);
  return read;
}

// The mean requests at each K over each instance's samples; an instance that was never
// sampled keeps no mean.
TEST(DraftKAveragesTest, MeansOverTheSamplesOfEachInstance) {
  DraftKAverages averages;
  averages.Add(Read({0, 2, 0, 0, 4}, {3}));
  averages.Add(Read({1, 1}, {1}));  // a shorter gauge: the missing K held nobody
  std::map<std::string, InstanceDelta> third;
  third["agg0"].draft_k_requests = {2, 0, 0, 0, 5};
  averages.Add(third);
  std::vector<InstanceDelta> deltas(3);
  deltas[0].name = "agg0";
  deltas[1].name = "agg1";
  deltas[2].name = "gen0";
  averages.Fill(&deltas);
  EXPECT_EQ(deltas[0].draft_k_request_samples, 3);
  EXPECT_THAT(deltas[0].mean_draft_k_requests, ElementsAre(1.0, 1.0, 0.0, 0.0, 3.0));
  EXPECT_EQ(deltas[1].draft_k_request_samples, 2);
  EXPECT_THAT(deltas[1].mean_draft_k_requests, ElementsAre(2.0));
  EXPECT_EQ(deltas[2].draft_k_request_samples, 0);
  EXPECT_THAT(deltas[2].mean_draft_k_requests, IsEmpty());
}

}  // namespace
}  // namespace lockstep::bench

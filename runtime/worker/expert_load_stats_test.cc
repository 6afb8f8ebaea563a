// SetExpertLoadStats / ExpertLoadFromStats: every layer's counts and imbalance on the
// wire, the dump text the same after the round trip, nothing before the first window,
// and inconsistent messages refused by name.
#include "runtime/worker/expert_load_stats.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

engine::ExpertLoadSnapshot TwoLayers() {
  engine::ExpertLoadSnapshot s;
  s.windows = 3;
  s.forwards = 8;
  s.num_layers = 2;
  s.num_experts = 4;
  s.num_ranks = 2;
  s.routed = {0, 0, 0, 0, 9, 1, 1, 1};  // layer 0 dense, layer 1 skewed
  s.computed = {0, 0, 10, 2};
  return s;
}

TEST(ExpertLoadStatsTest, EveryLayerOnTheWireAndBack) {
  v1::StatsResponse out;
  SetExpertLoadStats(TwoLayers(), &out);
  ASSERT_TRUE(out.has_expert_load());
  const v1::ExpertLoadStats& stats = out.expert_load();
  EXPECT_EQ(stats.windows(), 3);
  EXPECT_EQ(stats.forwards(), 8);
  ASSERT_EQ(stats.layers_size(), 2);
  EXPECT_THAT(stats.layers(1).routed(), ElementsAre(9, 1, 1, 1));
  EXPECT_THAT(stats.layers(1).computed(), ElementsAre(10, 2));
  EXPECT_DOUBLE_EQ(stats.layers(1).rank_imbalance(), 10.0 * 2 / 12);
  EXPECT_DOUBLE_EQ(stats.layers(0).rank_imbalance(), 1.0);
  const auto back = ExpertLoadFromStats(stats);
  ASSERT_THAT(back.status(), IsOk());
  EXPECT_EQ(back->Format(), TwoLayers().Format());
}

TEST(ExpertLoadStatsTest, NothingBeforeTheFirstWindow) {
  engine::ExpertLoadSnapshot none = TwoLayers();
  none.windows = 0;
  v1::StatsResponse out;
  SetExpertLoadStats(none, &out);
  EXPECT_FALSE(out.has_expert_load());
  EXPECT_THAT(ExpertLoadFromStats(out.expert_load()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("load_window")));
}

TEST(ExpertLoadStatsTest, InconsistentCountsNameTheLayer) {
  v1::StatsResponse out;
  SetExpertLoadStats(TwoLayers(), &out);
  out.mutable_expert_load()->mutable_layers(1)->add_computed(4);
  EXPECT_THAT(ExpertLoadFromStats(out.expert_load()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer 1: 4 routed")));
}

}  // namespace
}  // namespace lockstep::worker

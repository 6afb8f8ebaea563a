// ExpertLoad: counts accumulate over a window and are published at its end (summed
// over the ranks), the next window starts from zero; the snapshot's imbalance and text.
#include "runtime/engine/cpu/expert_load.h"

#include <memory>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;

TEST(ExpertLoadTest, PublishesEachWindow) {
  ExpertLoad load(2, 4, /*window=*/2, nullptr, absl::Seconds(5), "target");
  int windows_seen = 0;
  load.set_on_window([&](const ExpertLoadSnapshot& s) {
    ++windows_seen;
    EXPECT_EQ(s.windows, windows_seen);
  });
  const int experts[] = {0, 1, 1, 3};
  load.AddRouted(0, experts, 4);
  load.AddComputed(0, 4);
  ASSERT_THAT(load.EndForward(), IsOk());
  EXPECT_EQ(load.Latest().windows, 0);  // the window is not over
  load.AddRouted(1, experts, 2);
  load.AddComputed(1, 2);
  ASSERT_THAT(load.EndForward(), IsOk());
  ExpertLoadSnapshot s = load.Latest();
  EXPECT_EQ(s.windows, 1);
  EXPECT_THAT(s.routed, ElementsAre(1, 2, 0, 1, 1, 1, 0, 0));
  EXPECT_THAT(s.computed, ElementsAre(4, 2));
  EXPECT_THAT(s.LayerLoads(1), ElementsAre(1, 1, 0, 0));
  EXPECT_EQ(s.Format(),
            "# windows 1 forwards 2\nrouted 0: 1 2 0 1\ncomputed 0: 4\nrouted 1: 1 1 0 0\n"
            "computed 1: 2\n");
  // The next window starts from zero.
  ASSERT_THAT(load.EndForward(), IsOk());
  ASSERT_THAT(load.EndForward(), IsOk());
  s = load.Latest();
  EXPECT_EQ(s.windows, 2);
  EXPECT_THAT(s.routed, ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(windows_seen, 2);
}

TEST(ExpertLoadTest, SumsOverRanksAndMeasuresImbalance) {
  auto group = comm::MakeInProcessGroup(3);
  std::vector<std::unique_ptr<ExpertLoad>> loads;
  for (int r = 0; r < 3; ++r) {
    loads.push_back(
        std::make_unique<ExpertLoad>(1, 2, /*window=*/1, group[r].get(), absl::Seconds(30), "t"));
  }
  std::vector<absl::Status> status(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      const int experts[] = {r % 2};
      loads[r]->AddRouted(0, experts, 1);
      loads[r]->AddComputed(0, r == 0 ? 4 : 1);
      status[r] = loads[r]->EndForward();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_THAT(status[r], IsOk());
    const ExpertLoadSnapshot s = loads[r]->Latest();
    EXPECT_THAT(s.routed, ElementsAre(2, 1)) << "rank " << r;
    EXPECT_THAT(s.computed, ElementsAre(4, 1, 1)) << "rank " << r;
    EXPECT_DOUBLE_EQ(s.RankImbalance(0), 2.0);  // 4 of a mean of 2
  }
}

}  // namespace
}  // namespace lockstep::engine

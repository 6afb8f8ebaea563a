#include "runtime/cuda/cpu/kernel/schedule.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

TEST(ScheduleTest, ParsesTheThreeKinds) {
  EXPECT_EQ(ParseSchedule("forward")->kind, Schedule::Kind::kForward);
  EXPECT_EQ(ParseSchedule("reverse")->kind, Schedule::Kind::kReverse);
  const absl::StatusOr<Schedule> random = ParseSchedule("random:18446744073709551615");
  ASSERT_TRUE(random.ok()) << random.status();
  EXPECT_EQ(random->kind, Schedule::Kind::kRandom);
  EXPECT_EQ(random->seed, 18446744073709551615ull);
  EXPECT_EQ(ScheduleName(*random), "random:18446744073709551615");
}

TEST(ScheduleTest, RejectsMalformedValuesNamingThem) {
  for (const char* bad : {"", "Forward", "random", "random:", "random:-1", "random:x", "back"}) {
    const absl::StatusOr<Schedule> s = ParseSchedule(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(ScheduleTest, BlockOrders) {
  EXPECT_EQ(BlockOrder(*ParseSchedule("forward"), 4), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(BlockOrder(*ParseSchedule("reverse"), 4), (std::vector<uint32_t>{3, 2, 1, 0}));
  std::vector<uint32_t> random = BlockOrder(*ParseSchedule("random:5"), 100);
  EXPECT_EQ(random, BlockOrder(*ParseSchedule("random:5"), 100)) << "seeded: reproducible";
  EXPECT_NE(random, BlockOrder(*ParseSchedule("random:6"), 100));
  std::sort(random.begin(), random.end());
  EXPECT_EQ(random, BlockOrder(*ParseSchedule("forward"), 100)) << "a permutation";
}

TEST(ScheduleTest, RunQueueOrders) {
  RunQueue queue;
  queue.Reset(*ParseSchedule("reverse"), 0);
  queue.PushGroup({1, 2, 3});
  queue.Push(7);
  EXPECT_EQ(queue.Pop(), 3);
  EXPECT_EQ(queue.Pop(), 2);
  EXPECT_EQ(queue.Pop(), 1);
  EXPECT_EQ(queue.Pop(), 7);
  EXPECT_EQ(queue.Pop(), -1);
  EXPECT_TRUE(queue.empty());
  std::vector<int> picks;
  queue.Reset(*ParseSchedule("random:9"), 4);
  queue.PushGroup({0, 1, 2, 3, 4, 5, 6, 7});
  for (int t = queue.Pop(); t >= 0; t = queue.Pop()) picks.push_back(t);
  EXPECT_NE(picks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7})) << "seed 9 shuffles";
  std::sort(picks.begin(), picks.end());
  EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel

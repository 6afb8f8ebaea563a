#include "runtime/comm/faulty_communicator.h"

#include <memory>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

// N in-process ranks, each wrapped with the same rules.
struct FaultyGroup {
  FaultyGroup(int world, const std::vector<FaultRule>& rules) : inner(MakeInProcessGroup(world)) {
    for (auto& comm : inner) {
      faulty.push_back(std::make_unique<FaultyCommunicator>(comm.get(), rules));
    }
  }

  // Runs fn(rank's communicator) on one thread per rank.
  template <typename Fn>
  void RunAll(Fn fn) {
    std::vector<std::thread> threads;
    for (auto& comm : faulty) threads.emplace_back([&fn, c = comm.get()] { fn(*c); });
    for (std::thread& t : threads) t.join();
  }

  std::vector<std::unique_ptr<Communicator>> inner;
  std::vector<std::unique_ptr<FaultyCommunicator>> faulty;
};

TEST(FaultyCommunicatorTest, MutateInjectsAVetoAtTheKthVoteOnOneRank) {
  FaultyGroup group(4, {FaultRule::Mutate(/*rank=*/2, "vote", /*occurrence=*/1,
                                          [](absl::Span<int64_t> vote) { vote[0] = 0; })});
  std::vector<std::vector<int64_t>> seen(4);
  group.RunAll([&](FaultyCommunicator& comm) {
    for (int step = 0; step < 3; ++step) {
      int64_t can_forward = 1;
      ASSERT_THAT(comm.AllReduce(absl::MakeSpan(&can_forward, 1), ReduceOp::kMin, Tag("vote")),
                  IsOk());
      seen[comm.rank()].push_back(can_forward);
      ASSERT_THAT(comm.Barrier(Tag("end")), IsOk());
    }
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(seen[r], ElementsAre(1, 0, 1)) << "rank " << r;
    EXPECT_EQ(group.faulty[r]->CallCount("vote"), 3);
    EXPECT_EQ(group.faulty[r]->CallCount("end"), 3);
    EXPECT_EQ(group.faulty[r]->InjectedCount("vote"), r == 2 ? 1 : 0);
  }
}

TEST(FaultyCommunicatorTest, MutateCopiesAllGatherInput) {
  FaultyGroup group(2, {FaultRule::Mutate(FaultRule::kAnyRank, "load", FaultRule::kEveryOccurrence,
                                          [](absl::Span<int64_t> load) { load[0] += 100; })});
  group.RunAll([&](FaultyCommunicator& comm) {
    const std::vector<int64_t> load = {comm.rank()};
    std::vector<int64_t> all(2);
    ASSERT_THAT(comm.AllGather(load, absl::MakeSpan(all), Tag("load")), IsOk());
    EXPECT_THAT(all, ElementsAre(100, 101));
    EXPECT_THAT(load, ElementsAre(comm.rank()));
  });
}

TEST(FaultyCommunicatorTest, FailSkipsTheInnerCallSoPeersTimeOut) {
  FaultyGroup group(3, {FaultRule::Fail(/*rank=*/1, "intake", /*occurrence=*/0,
                                        absl::UnavailableError("link down"))});
  std::vector<absl::Status> results(3);
  group.RunAll([&](FaultyCommunicator& comm) {
    std::string data = "requests";
    results[comm.rank()] = comm.Broadcast(&data, 0, Tag("intake", absl::Milliseconds(50)));
  });
  EXPECT_THAT(results[1], StatusIs(absl::StatusCode::kUnavailable,
                                   HasSubstr("injected into Broadcast('intake') on rank 1: "
                                             "link down")));
  for (int r : {0, 2}) {
    EXPECT_THAT(results[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                     HasSubstr("rank(s) 1 did not arrive")));
  }
  // The failed rank is broken from now on, without reaching the inner communicator.
  EXPECT_THAT(group.faulty[1]->Barrier(Tag("next")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("link down")));
  EXPECT_EQ(group.faulty[1]->CallCount("next"), 0);
  EXPECT_EQ(group.faulty[1]->InjectedCount("intake"), 1);
}

TEST(FaultyCommunicatorTest, DelaySleepsOnTheInjectedClockBeforeTheCall) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  FaultyCommunicator faulty(
      solo.get(), {FaultRule::Delay(0, "vote", FaultRule::kEveryOccurrence, absl::Seconds(5))},
      &clock);
  faulty.AddRule(FaultRule::Delay(0, "vote", /*occurrence=*/1, absl::Seconds(1)));
  int64_t v = 7;
  ASSERT_THAT(faulty.AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum, Tag("vote")), IsOk());
  EXPECT_EQ(clock.Now() - start, absl::Seconds(5));
  ASSERT_THAT(faulty.AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum, Tag("vote")), IsOk());
  EXPECT_EQ(clock.Now() - start, absl::Seconds(11));
  ASSERT_THAT(faulty.Barrier(Tag("other")), IsOk());
  EXPECT_EQ(clock.Now() - start, absl::Seconds(11));
  EXPECT_EQ(v, 7);
  EXPECT_EQ(faulty.InjectedCount("vote"), 3);
}

TEST(FaultyCommunicatorTest, InnerErrorsBreakTheWrapperToo) {
  auto group = MakeInProcessGroup(2);
  FaultyCommunicator faulty(group[0].get(), {});
  group[1].reset();
  EXPECT_THAT(faulty.Barrier(Tag("step")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(faulty.Barrier(Tag("step")), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace lockstep::comm

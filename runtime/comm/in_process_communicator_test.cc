#include "runtime/comm/in_process_communicator.h"

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/testing/conformance.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

using RankFn = std::function<absl::Status(Communicator&)>;

// Runs fns[r] on rank r of `group`, one thread per rank; returns each rank's status.
std::vector<absl::Status> RunRanks(std::vector<std::unique_ptr<Communicator>>& group,
                                   const std::vector<RankFn>& fns) {
  std::vector<absl::Status> results(group.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fns[r](*group[r]); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

std::vector<absl::Status> RunAll(std::vector<std::unique_ptr<Communicator>>& group,
                                 const RankFn& fn) {
  return RunRanks(group, std::vector<RankFn>(group.size(), fn));
}

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

class InProcessConformanceTest : public ::testing::TestWithParam<int> {};

TEST_P(InProcessConformanceTest, EveryOpMatchesTheReference) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  auto group = MakeInProcessGroup(GetParam());
  for (const absl::Status& s : RunAll(group, [&](Communicator& comm) {
         return testing::RunConformance(comm, seed, /*rounds=*/4);
       })) {
    EXPECT_THAT(s, IsOk());
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, InProcessConformanceTest, ::testing::Range(1, 9));

TEST(InProcessCommunicatorTest, SoloCommunicatorIsALocalCopy) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::unique_ptr<Communicator> solo = MakeSoloCommunicator();
  EXPECT_EQ(solo->rank(), 0);
  EXPECT_EQ(solo->world_size(), 1);
  EXPECT_THAT(testing::RunConformance(*solo, seed, /*rounds=*/2), IsOk());
  std::vector<int64_t> data = {3, -4};
  EXPECT_THAT(solo->AllReduce(absl::MakeSpan(data), ReduceOp::kSum, Tag("vote")), IsOk());
  EXPECT_THAT(data, ::testing::ElementsAre(3, -4));
}

TEST(InProcessCommunicatorTest, ManySmallCollectivesStayInStep) {
  auto group = MakeInProcessGroup(4);
  for (const absl::Status& s : RunAll(group, [](Communicator& comm) -> absl::Status {
         for (int64_t step = 0; step < 3000; ++step) {
           int64_t vote[2] = {comm.rank() + step, step % 2 == 0 ? comm.rank() : -comm.rank()};
           RETURN_IF_ERROR(comm.AllReduce(absl::MakeSpan(vote), ReduceOp::kMax, Tag("vote")));
           if (vote[0] != 3 + step || vote[1] != (step % 2 == 0 ? 3 : 0)) {
             return absl::InternalError(absl::StrCat("step ", step, " got ", vote[0]));
           }
         }
         return absl::OkStatus();
       })) {
    EXPECT_THAT(s, IsOk());
  }
}

TEST(InProcessCommunicatorTest, OtherOpIsADesyncOnEveryRank) {
  auto group = MakeInProcessGroup(4);
  RankFn vote = [](Communicator& comm) {
    int64_t v = 1;
    return comm.AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum, Tag("vote"));
  };
  RankFn gather = [](Communicator& comm) { return comm.Gather("x", 0, Tag("responses")).status(); };
  for (const absl::Status& s : RunRanks(group, {vote, vote, gather, vote})) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            "collective desync: rank 0 called AllReduce('vote'), rank 2 called "
                            "Gather('responses')"));
  }
  // Broken for good: later calls fail at once and name the first error.
  int64_t v = 0;
  EXPECT_THAT(group[1]->AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum, Tag("vote")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("collective desync")));
}

TEST(InProcessCommunicatorTest, OtherTagIsADesync) {
  auto group = MakeInProcessGroup(3);
  auto barrier = [](absl::string_view tag) {
    return RankFn([tag](Communicator& comm) { return comm.Barrier(Tag(tag)); });
  };
  for (const absl::Status& s : RunRanks(group, {barrier("a"), barrier("b"), barrier("a")})) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            "collective desync: rank 0 called Barrier('a'), rank 1 called "
                            "Barrier('b')"));
  }
}

TEST(InProcessCommunicatorTest, OtherSizeOrRootIsADesync) {
  auto group = MakeInProcessGroup(2);
  RankFn reduce = [](Communicator& comm) {
    std::vector<int64_t> v(comm.rank() == 0 ? 4 : 3, 1);
    return comm.AllReduce(absl::MakeSpan(v), ReduceOp::kSum, Tag("vote"));
  };
  for (const absl::Status& s : RunAll(group, reduce)) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("rank 0 called AllReduce('vote') with 4 elements, rank 1 "
                                      "called AllReduce('vote') with 3 elements")));
  }
  group = MakeInProcessGroup(2);
  RankFn broadcast = [](Communicator& comm) {
    std::string data = "x";
    return comm.Broadcast(&data, comm.rank(), Tag("intake"));
  };
  for (const absl::Status& s : RunAll(group, broadcast)) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal, HasSubstr("with root 1")));
  }
}

TEST(InProcessCommunicatorTest, AllToAllVCountMismatchFailsEveryRank) {
  auto group = MakeInProcessGroup(2);
  RankFn exchange = [](Communicator& comm) {
    std::vector<float> send(4, 1.0f);
    std::vector<float> recv(4);
    const std::vector<int64_t> send_counts = {2, 2};
    // Rank 1 expects 1 float from rank 0, which sends 2.
    const std::vector<int64_t> recv_counts =
        comm.rank() == 1 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 2};
    return comm.AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe.l3"));
  };
  for (const absl::Status& s : RunAll(group, exchange)) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("rank 0 sends 2 floats to rank 1, which expects 1")));
  }
}

TEST(InProcessCommunicatorTest, BadArgumentsFailEveryRank) {
  auto group = MakeInProcessGroup(3);
  RankFn gather = [](Communicator& comm) { return comm.Gather("x", 7, Tag("responses")).status(); };
  for (const absl::Status& s : RunAll(group, gather)) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("root 7 is outside the group of 3")));
  }
  group = MakeInProcessGroup(2);
  RankFn gather_all = [](Communicator& comm) {
    std::vector<int64_t> out(comm.rank() == 1 ? 3 : 2);
    return comm.AllGather(std::vector<int64_t>{1}, absl::MakeSpan(out), Tag("load"));
  };
  for (const absl::Status& s : RunAll(group, gather_all)) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("AllGather('load') on rank 1: out has 3 elements")));
  }
}

TEST(InProcessCommunicatorTest, MissingRankTimesOutNamingTagAndRank) {
  auto group = MakeInProcessGroup(4);
  RankFn vote = [](Communicator& comm) {
    int64_t v = 1;
    return comm.AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum,
                          Tag("vote", absl::Milliseconds(50)));
  };
  RankFn absent = [](Communicator&) { return absl::OkStatus(); };
  std::vector<absl::Status> results = RunRanks(group, {vote, vote, vote, absent});
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(results[r],
                StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("AllReduce('vote')")));
    EXPECT_THAT(results[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                     HasSubstr("rank(s) 3 did not arrive")));
  }
  // The late rank finds the group broken.
  EXPECT_THAT(group[3]->Barrier(Tag("late")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("did not arrive")));
  EXPECT_THAT(group[0]->Barrier(Tag("again")), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(InProcessCommunicatorTest, DestroyedMemberMakesPeersUnavailable) {
  auto group = MakeInProcessGroup(3);
  group[1].reset();
  for (int r : {0, 2}) {
    // A long timeout: only the death of rank 1 can end these calls early.
    EXPECT_THAT(group[r]->Barrier(Tag("step", absl::Seconds(30))),
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("rank 1 of the in-process group is gone")));
  }
}

TEST(InProcessCommunicatorTest, MarkDeadWakesBlockedPeers) {
  auto group = MakeInProcessGroup(3);
  std::vector<absl::Status> results(2);
  std::vector<std::thread> peers;
  for (int r = 0; r < 2; ++r) {
    peers.emplace_back([&, r] { results[r] = group[r]->Barrier(Tag("step", absl::Seconds(30))); });
  }
  static_cast<InProcessCommunicator*>(group[2].get())->MarkDead();
  for (std::thread& t : peers) t.join();
  for (const absl::Status& s : results) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("marked dead")));
  }
  EXPECT_THAT(group[2]->Barrier(Tag("step")), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace lockstep::comm

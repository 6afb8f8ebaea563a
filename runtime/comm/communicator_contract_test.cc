// The Communicator contract (communicator.h), run on every transport with its ranks
// as threads of this process: the conformance suite (every op against the reference)
// and the error cases (desync, invalid arguments, a missing or departed rank, broken
// after the first error). Transport-specific behaviour is tested next to each
// transport; ranks as processes in gloo_communicator_test and shm_communicator_test.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/testing/conformance.h"
#include "runtime/comm/testing/thread_groups.h"

namespace lockstep::comm {
namespace {

using ::lockstep::comm::testing::MakeThreadGroup;
using ::lockstep::comm::testing::RankFn;
using ::lockstep::comm::testing::RunAll;
using ::lockstep::comm::testing::RunRanks;
using ::lockstep::comm::testing::ThreadGroup;
using ::lockstep::comm::testing::TraitsOf;
using ::lockstep::comm::testing::Transport;
using ::lockstep::comm::testing::TransportName;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr Transport kAll[] = {Transport::kInProcess, Transport::kGloo, Transport::kShm,
                              Transport::kNcclFake};

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

// ---- The conformance suite at several world sizes.

class ConformanceTest : public ::testing::TestWithParam<std::tuple<Transport, int>> {};

TEST_P(ConformanceTest, EveryOpMatchesTheReference) {
  const auto [transport, world] = GetParam();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  auto group = MakeThreadGroup(transport, world);
  ASSERT_THAT(group, IsOk());
  for (const absl::Status& s : RunAll(*group, [&](Communicator& comm) {
         return testing::RunConformance(comm, seed, /*rounds=*/4);
       })) {
    EXPECT_THAT(s, IsOk());
  }
}

std::string ConformanceName(const ::testing::TestParamInfo<std::tuple<Transport, int>>& info) {
  return absl::StrCat(TransportName(std::get<0>(info.param)), "_", std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(ThreadRanks, ConformanceTest,
                         ::testing::Combine(::testing::Values(Transport::kInProcess,
                                                              Transport::kShm,
                                                              Transport::kNcclFake),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         ConformanceName);
INSTANTIATE_TEST_SUITE_P(GlooThreadRanks, ConformanceTest,
                         ::testing::Combine(::testing::Values(Transport::kGloo),
                                            ::testing::Values(2, 4)),
                         ConformanceName);

// ---- The error contract, on every transport.

class ContractTest : public ::testing::TestWithParam<Transport> {
 protected:
  ThreadGroup Group(int world) {
    auto group = MakeThreadGroup(GetParam(), world);
    EXPECT_THAT(group, IsOk());
    return group.ok() ? *std::move(group) : ThreadGroup();
  }
};

TEST_P(ContractTest, ManySmallCollectivesStayInStep) {
  ThreadGroup group = Group(4);
  ASSERT_EQ(group.size(), 4u);
  for (const absl::Status& s : RunAll(group, [](Communicator& comm) -> absl::Status {
         for (int64_t step = 0; step < 500; ++step) {
           int64_t vote[4] = {comm.rank() + step, step % 2 == 0 ? comm.rank() : -comm.rank(), 1, 0};
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

TEST_P(ContractTest, OtherOpIsADesyncOnEveryRankAndBreaksTheGroup) {
  if (!TraitsOf(GetParam()).detects_other_op) GTEST_SKIP() << "calls of other ops time out";
  ThreadGroup group = Group(4);
  ASSERT_EQ(group.size(), 4u);
  RankFn vote = [](Communicator& comm) {
    int64_t v = 1;
    return comm.AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum, Tag("vote"));
  };
  RankFn gather = [](Communicator& comm) { return comm.Gather("x", 0, Tag("responses")).status(); };
  for (const absl::Status& s : RunRanks(group, {vote, vote, gather, vote})) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            AllOf(HasSubstr("collective desync: rank 0 called AllReduce('vote')"),
                                  HasSubstr("rank 2 called Gather('responses')"))));
  }
  int64_t v = 0;
  EXPECT_THAT(group[1]->AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum, Tag("vote")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("collective desync")));
}

TEST_P(ContractTest, OtherTagSizeOrRootIsADesync) {
  auto reduce = [](int64_t n, absl::string_view tag) {
    return RankFn([=](Communicator& comm) {
      std::vector<int64_t> v(n, 1);
      return comm.AllReduce(absl::MakeSpan(v), ReduceOp::kSum, Tag(tag));
    });
  };
  auto broadcast = [](int root) {
    return RankFn([=](Communicator& comm) {
      std::string data = "x";
      return comm.Broadcast(&data, root, Tag("intake"));
    });
  };
  const std::vector<std::pair<RankFn, RankFn>> cases = {
      {reduce(1, "a"), reduce(1, "b")},    // tag
      {reduce(4, "v"), reduce(3, "v")},    // size
      {reduce(40, "v"), reduce(41, "v")},  // size, beyond any inline block
      {broadcast(0), broadcast(1)},        // root
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("case ", i));
    ThreadGroup group = Group(3);
    ASSERT_EQ(group.size(), 3u);
    for (const absl::Status& s :
         RunRanks(group, {cases[i].first, cases[i].second, cases[i].second})) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal, HasSubstr("collective desync")));
    }
  }
}

TEST_P(ContractTest, AllToAllVCountMismatchFailsEveryRank) {
  ThreadGroup group = Group(2);
  ASSERT_EQ(group.size(), 2u);
  for (const absl::Status& s : RunAll(group, [](Communicator& comm) {
         std::vector<float> send(4, 1.0f);
         std::vector<float> recv(4);
         const std::vector<int64_t> send_counts = {2, 2};
         // Rank 1 expects 1 float from rank 0, which sends 2.
         const std::vector<int64_t> recv_counts =
             comm.rank() == 1 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 2};
         return comm.AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe.l3"));
       })) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("rank 0 sends 2 floats to rank 1, which expects 1")));
  }
}

TEST_P(ContractTest, BadArgumentsFailEveryRank) {
  ThreadGroup group = Group(3);
  ASSERT_EQ(group.size(), 3u);
  for (const absl::Status& s : RunAll(group, [](Communicator& comm) {
         return comm.Gather("x", 7, Tag("responses")).status();
       })) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("root 7")));
  }
  group = Group(2);
  ASSERT_EQ(group.size(), 2u);
  for (const absl::Status& s : RunAll(group, [](Communicator& comm) {
         std::vector<int64_t> out(comm.rank() == 1 ? 3 : 2);
         return comm.AllGather(std::vector<int64_t>{1}, absl::MakeSpan(out), Tag("load"));
       })) {
    EXPECT_THAT(
        s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("AllGather('load') on rank 1")));
  }
}

TEST_P(ContractTest, MissingRankTimesOutNamingTheCall) {
  ThreadGroup group = Group(4);
  ASSERT_EQ(group.size(), 4u);
  RankFn vote = [](Communicator& comm) {
    int64_t v = 1;
    return comm.AllReduce(absl::MakeSpan(&v, 1), ReduceOp::kSum,
                          Tag("vote", absl::Milliseconds(200)));
  };
  RankFn absent = [](Communicator&) { return absl::OkStatus(); };
  std::vector<absl::Status> results = RunRanks(group, {vote, vote, vote, absent});
  int timed_out = 0;
  for (int r = 0; r < 3; ++r) {
    // A rank times out, or (gloo) sees a peer that timed out first close its connection:
    // on a loaded machine the ranks' deadlines pass at different times.
    EXPECT_THAT(results[r],
                AnyOf(StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("AllReduce('vote')")),
                      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("AllReduce('vote')"))))
        << "rank " << r;
    timed_out += absl::IsDeadlineExceeded(results[r]);
  }
  EXPECT_GE(timed_out, 1) << "no rank waited out the deadline";
  if (TraitsOf(GetParam()).late_rank_sees_broken_peers) {
    EXPECT_THAT(group[3]->Barrier(Tag("late", absl::Seconds(30))),
                StatusIs(absl::StatusCode::kUnavailable));
  }
  EXPECT_THAT(group[0]->Barrier(Tag("again")),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("AllReduce('vote')")));
}

TEST_P(ContractTest, DestroyedMemberMakesPeersUnavailable) {
  if (!TraitsOf(GetParam()).peer_exit_is_unavailable) GTEST_SKIP();
  ThreadGroup group = Group(3);
  ASSERT_EQ(group.size(), 3u);
  group[1].reset();
  std::vector<RankFn> fns(3, [](Communicator& comm) {
    // A long timeout: only the departure of rank 1 can end these calls early.
    return comm.Barrier(Tag("step", absl::Seconds(30)));
  });
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int r : {0, 2}) threads.emplace_back([&, r] { results[r] = fns[r](*group[r]); });
  for (std::thread& t : threads) t.join();
  const bool named = TraitsOf(GetParam()).names_the_failed_peer;
  for (int r : {0, 2}) {
    EXPECT_THAT(results[r],
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr(named ? "rank 1" : "")))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ContractTest, ::testing::ValuesIn(kAll),
                         [](const ::testing::TestParamInfo<Transport>& info) {
                           return TransportName(info.param);
                         });

}  // namespace
}  // namespace lockstep::comm

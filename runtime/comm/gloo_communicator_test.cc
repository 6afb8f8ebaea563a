// GlooCommunicator across real processes: the test binary re-executes itself once per
// rank (testing/rank_processes.h). Each child runs a scenario and exits 0 when every
// check of its rank passed; the parent test checks every rank's exit.
#include "runtime/comm/gloo_communicator.h"

#include <signal.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gloo/rendezvous/file_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/comm/rendezvous_store.h"
#include "runtime/comm/testing/conformance.h"
#include "runtime/comm/testing/rank_processes.h"

namespace lockstep::comm {
namespace {

using ::lockstep::comm::testing::RankProcessRole;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

// ---- Child side: one rank process. args[0] is "file" or "grpc", args[1] the store
// directory or the rendezvous address, args[2] the seed.

class RankStore {
 public:
  explicit RankStore(const RankProcessRole& role) {
    if (role.args.at(0) == "file") {
      store_ = std::make_unique<gloo::rendezvous::FileStore>(role.args.at(1));
    } else {
      client_ = RendezvousClient::Connect(role.args.at(1), "gloo-test");
      rendezvous_store_ = std::make_unique<RendezvousStore>(client_.get());
    }
  }

  absl::StatusOr<std::unique_ptr<GlooCommunicator>> Connect(const RankProcessRole& role,
                                                            const std::string& prefix) {
    GlooOptions options;
    options.rank = role.rank;
    options.world_size = role.world_size;
    options.prefix = prefix;
    options.connect_timeout = absl::Seconds(20);
    if (rendezvous_store_ != nullptr) {
      options.store = rendezvous_store_.get();
      options.store_error = [this] { return rendezvous_store_->first_error(); };
    } else {
      options.store = store_.get();
    }
    return GlooCommunicator::Create(options);
  }

 private:
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::unique_ptr<RendezvousClient> client_;
  std::unique_ptr<RendezvousStore> rendezvous_store_;
};

uint64_t Seed(const RankProcessRole& role) {
  uint64_t seed = 0;
  return role.args.size() > 2 && absl::SimpleAtoi(role.args[2], &seed) ? seed : 1;
}

absl::Status Expect(bool condition, absl::string_view what, const absl::Status& status) {
  if (condition) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("expected ", what, ", got ", status.ToString()));
}

absl::Status RunConformanceRank(const RankProcessRole& role) {
  RankStore store(role);
  ASSIGN_OR_RETURN(auto comm, store.Connect(role, "conformance"));
  return testing::RunConformance(*comm, Seed(role), /*rounds=*/3);
}

// Two groups in the same processes: concurrently (an executor and an engine thread),
// then interleaved op by op on one thread.
absl::Status RunTwoGroupsRank(const RankProcessRole& role) {
  RankStore store(role);
  ASSIGN_OR_RETURN(auto executor, store.Connect(role, "executor"));
  ASSIGN_OR_RETURN(auto engine, store.Connect(role, "engine"));
  absl::Status engine_status;
  std::thread engine_thread(
      [&] { engine_status = testing::RunConformance(*engine, Seed(role) + 1, /*rounds=*/2); });
  absl::Status executor_status = testing::RunConformance(*executor, Seed(role), /*rounds=*/2);
  engine_thread.join();
  RETURN_IF_ERROR(executor_status);
  RETURN_IF_ERROR(engine_status);
  const int world = role.world_size;
  for (int step = 0; step < 20; ++step) {
    int64_t vote[2] = {role.rank + step, step};
    RETURN_IF_ERROR(executor->AllReduce(absl::MakeSpan(vote), ReduceOp::kMax, Tag("vote")));
    std::string token_counts = absl::StrCat("rank", role.rank, "step", step);
    ASSIGN_OR_RETURN(std::vector<std::string> all, engine->AllGatherBytes(token_counts, Tag("x")));
    std::string intake = role.rank == 0 ? absl::StrCat("requests of step ", step) : "";
    RETURN_IF_ERROR(executor->Broadcast(&intake, 0, Tag("intake")));
    RETURN_IF_ERROR(engine->Barrier(Tag("layer")));
    if (vote[0] != world - 1 + step || vote[1] != step ||
        all[world - 1] != absl::StrCat("rank", world - 1, "step", step) ||
        intake != absl::StrCat("requests of step ", step)) {
      return absl::InternalError(absl::StrCat("wrong result at interleaved step ", step));
    }
  }
  return absl::OkStatus();
}

// The last rank dies without a word after the first barrier.
absl::Status RunSigkillRank(const RankProcessRole& role) {
  RankStore store(role);
  ASSIGN_OR_RETURN(auto comm, store.Connect(role, "sigkill"));
  RETURN_IF_ERROR(comm->Barrier(Tag("ready")));
  if (role.rank == role.world_size - 1) raise(SIGKILL);
  for (int step = 0; step < 1000; ++step) {
    int64_t vote = 1;
    absl::Status status =
        comm->AllReduce(absl::MakeSpan(&vote, 1), ReduceOp::kMin, Tag("vote", absl::Seconds(5)));
    if (status.ok()) continue;  // The death may not have been noticed yet.
    RETURN_IF_ERROR(Expect(status.code() == absl::StatusCode::kUnavailable ||
                               status.code() == absl::StatusCode::kDeadlineExceeded,
                           "Unavailable or DeadlineExceeded", status));
    std::fprintf(stderr, "rank %d: %s\n", role.rank, status.ToString().c_str());
    absl::Status again = comm->Barrier(Tag("after"));
    return Expect(again.code() == absl::StatusCode::kFailedPrecondition, "FailedPrecondition",
                  again);
  }
  return absl::InternalError("the dead rank was never noticed");
}

absl::Status ExpectDesync(const absl::Status& status, absl::string_view detail) {
  return Expect(status.code() == absl::StatusCode::kInternal &&
                    absl::StrContains(status.message(), "collective desync") &&
                    absl::StrContains(status.message(), detail),
                absl::StrCat("collective desync with '", detail, "'"), status);
}

// Three desyncs, each in its own group: other op, other tag, mismatched counts.
absl::Status RunDesyncRank(const RankProcessRole& role) {
  RankStore store(role);
  ASSIGN_OR_RETURN(auto headers, store.Connect(role, "desync-header"));
  absl::Status status = role.rank == 1 ? headers->Gather("r", 0, Tag("responses")).status()
                                       : headers->AllGatherBytes("r", Tag("responses")).status();
  RETURN_IF_ERROR(ExpectDesync(status,
                               "rank 0 called AllGatherBytes('responses'), rank 1 called "
                               "Gather('responses') with root 0"));

  ASSIGN_OR_RETURN(auto inline_group, store.Connect(role, "desync-inline"));
  int64_t vote = 1;
  status = inline_group->AllReduce(absl::MakeSpan(&vote, 1), ReduceOp::kSum,
                                   Tag(role.rank == 1 ? "vote2" : "vote"));
  RETURN_IF_ERROR(ExpectDesync(status, "AllReduce('vote"));

  ASSIGN_OR_RETURN(auto moe, store.Connect(role, "desync-counts"));
  const int world = role.world_size;
  std::vector<float> send(world, 1.0f), recv(world + 1, 0.0f);
  std::vector<int64_t> send_counts(world, 1), recv_counts(world, 1);
  if (role.rank == 0) recv_counts[1] = 2;  // Rank 1 sends one float, rank 0 expects two.
  status = moe->AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, Tag("moe.l0"));
  return ExpectDesync(status, "rank 1 sends 1 floats to rank 0, which expects 2");
}

// Rank 1 waits in an op that cannot meet the others' (a header exchange against an
// inline all-reduce); the others time out; then they exit and rank 1 notices.
absl::Status RunTimeoutRank(const RankProcessRole& role) {
  RankStore store(role);
  ASSIGN_OR_RETURN(auto comm, store.Connect(role, "timeout"));
  if (role.rank == 1) {
    absl::Status status = comm->Gather("late", 0, Tag("late", absl::Seconds(20))).status();
    return Expect(status.code() == absl::StatusCode::kUnavailable, "Unavailable", status);
  }
  int64_t vote = 1;
  absl::Status status = comm->AllReduce(absl::MakeSpan(&vote, 1), ReduceOp::kSum,
                                        Tag("vote", absl::Milliseconds(300)));
  return Expect(status.code() == absl::StatusCode::kDeadlineExceeded &&
                    absl::StrContains(status.message(), "AllReduce('vote')"),
                "DeadlineExceeded naming AllReduce('vote')", status);
}

int RunRank(const RankProcessRole& role) {
  absl::Status status = absl::InvalidArgumentError("unknown scenario " + role.scenario);
  if (role.scenario == "conformance") status = RunConformanceRank(role);
  if (role.scenario == "two_groups") status = RunTwoGroupsRank(role);
  if (role.scenario == "sigkill") status = RunSigkillRank(role);
  if (role.scenario == "desync") status = RunDesyncRank(role);
  if (role.scenario == "timeout") status = RunTimeoutRank(role);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d of '%s' failed: %s\n", role.rank, role.scenario.c_str(),
                 status.ToString().c_str());
  }
  return status.ok() ? 0 : 1;
}

// ---- Parent side.

constexpr absl::Duration kRunTimeout = absl::Seconds(45);

void ExpectAllExitedZero(const absl::StatusOr<std::vector<testing::RankExit>>& exits) {
  ASSERT_THAT(exits, IsOk());
  for (size_t r = 0; r < exits->size(); ++r) {
    const testing::RankExit& exit = (*exits)[r];
    EXPECT_TRUE(exit.exited && exit.exit_code == 0)
        << "rank " << r << ": " << testing::DescribeExit(exit) << " (its stderr is above)";
  }
}

std::vector<std::string> FileStoreArgs(absl::string_view name) {
  return {"file", testing::MakeTempDir(name), absl::StrCat(lockstep::testing::TestSeed())};
}

class GlooConformanceTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooConformanceTest, EveryOpMatchesTheReferenceOverFileStore) {
  SCOPED_TRACE(lockstep::testing::SeedTrace(lockstep::testing::TestSeed()));
  ExpectAllExitedZero(testing::RunRankProcesses("conformance", GetParam(),
                                                FileStoreArgs("conformance"), kRunTimeout));
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooConformanceTest, ::testing::Values(2, 4));

TEST(GlooCommunicatorTest, BootstrapsThroughTheRendezvousService) {
  SCOPED_TRACE(lockstep::testing::SeedTrace(lockstep::testing::TestSeed()));
  auto server = RendezvousServer::Start();
  ASSERT_THAT(server, IsOk());
  ExpectAllExitedZero(testing::RunRankProcesses(
      "conformance", 3, {"grpc", (*server)->address(), absl::StrCat(lockstep::testing::TestSeed())},
      kRunTimeout));
  // gloo publishes two keys per rank: its hostname ("rank_<r>") and its addresses ("<r>").
  EXPECT_EQ((*server)->service().size(), 2u * 3);
}

TEST(GlooCommunicatorTest, TwoGroupsInTheSameProcessesStayIndependent) {
  SCOPED_TRACE(lockstep::testing::SeedTrace(lockstep::testing::TestSeed()));
  ExpectAllExitedZero(
      testing::RunRankProcesses("two_groups", 3, FileStoreArgs("two_groups"), kRunTimeout));
}

TEST(GlooCommunicatorTest, SigkilledPeerIsAnErrorOnTheSurvivors) {
  absl::StatusOr<std::vector<testing::RankExit>> exits =
      testing::RunRankProcesses("sigkill", 4, FileStoreArgs("sigkill"), kRunTimeout);
  ASSERT_THAT(exits, IsOk());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE((*exits)[r].exited && (*exits)[r].exit_code == 0)
        << "rank " << r << ": " << testing::DescribeExit((*exits)[r]);
  }
  EXPECT_EQ((*exits)[3].signal, SIGKILL) << testing::DescribeExit((*exits)[3]);
}

TEST(GlooCommunicatorTest, DesyncIsReportedOnEveryRank) {
  ExpectAllExitedZero(testing::RunRankProcesses("desync", 3, FileStoreArgs("desync"), kRunTimeout));
}

TEST(GlooCommunicatorTest, RankInAnotherOpMakesPeersTimeOut) {
  ExpectAllExitedZero(
      testing::RunRankProcesses("timeout", 3, FileStoreArgs("timeout"), kRunTimeout));
}

TEST(GlooCommunicatorTest, CreateRejectsBadOptions) {
  gloo::rendezvous::FileStore store(testing::MakeTempDir("bad_options"));
  GlooOptions options;
  options.world_size = 2;
  options.rank = 2;
  options.store = &store;
  options.prefix = "g";
  EXPECT_THAT(GlooCommunicator::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 2")));
  options.rank = 0;
  options.prefix = "";
  EXPECT_THAT(GlooCommunicator::Create(options), StatusIs(absl::StatusCode::kInvalidArgument));
  options.prefix = "g";
  options.store = nullptr;
  EXPECT_THAT(GlooCommunicator::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("store")));
}

TEST(GlooCommunicatorTest, MissingPeerTimesOutTheBootstrap) {
  gloo::rendezvous::FileStore store(testing::MakeTempDir("missing_peer"));
  GlooOptions options;
  options.world_size = 2;
  options.store = &store;
  options.prefix = "lonely";
  options.connect_timeout = absl::Milliseconds(200);
  EXPECT_THAT(GlooCommunicator::Create(options),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("group 'lonely'")));
}

TEST(GlooCommunicatorTest, MissingPeerThroughRendezvousReportsTheStoreError) {
  auto server = RendezvousServer::Start();
  ASSERT_THAT(server, IsOk());
  auto client = RendezvousClient::Connect((*server)->address(), "launch");
  RendezvousStore store(client.get());
  GlooOptions options;
  options.world_size = 2;
  options.store = &store;
  options.store_error = [&store] { return store.first_error(); };
  options.prefix = "lonely";
  options.connect_timeout = absl::Milliseconds(200);
  EXPECT_THAT(GlooCommunicator::Create(options),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("lonely/1")));
}

}  // namespace
}  // namespace lockstep::comm

int main(int argc, char** argv) {
  if (std::optional<lockstep::comm::testing::RankProcessRole> role =
          lockstep::comm::testing::GetRankProcessRole()) {
    return lockstep::comm::RunRank(*role);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

// ShmCommunicator's own behaviour, with its ranks as threads of this process and as
// real processes (the test binary re-executes itself once per rank,
// testing/rank_processes.h): its payload modes (staged rounds, direct reads), segment
// names and epochs, SIGKILLed peers. The shared contract and the conformance suite at
// the default options run in communicator_contract_test.
#include "runtime/comm/shm_communicator.h"

#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/shm_segment.h"
#include "runtime/comm/testing/conformance.h"
#include "runtime/comm/testing/rank_processes.h"
#include "runtime/comm/testing/thread_groups.h"

namespace lockstep::comm {
namespace {

using ::lockstep::comm::testing::RankProcessRole;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

constexpr int64_t kSmallChunk = 256;  // Forces multi-round calls in the conformance suite.
constexpr int64_t kStaged = -1;       // direct_min: no direct reads at all
constexpr int64_t kAlwaysDirect = 1;  // direct_min: every payload read in place
constexpr int64_t kDefaultDirect = int64_t{64} << 10;

// How payloads move: the round size, and from what size they are read in place.
struct Mode {
  int64_t chunk = int64_t{1} << 20;
  int64_t direct_min = kDefaultDirect;
};

CallOptions Tag(absl::string_view tag, absl::Duration timeout = absl::Seconds(10)) {
  CallOptions options;
  options.tag = tag;
  options.timeout = timeout;
  return options;
}

std::string FreshName(absl::string_view what) { return testing::FreshShmName(what); }

bool NameExists(const std::string& name) {
  struct stat st;
  return stat(absl::StrCat("/dev/shm/", name).c_str(), &st) == 0;
}

ShmOptions Options(const std::string& name, int rank, int world, Mode mode = {}) {
  ShmOptions options;
  options.name = name;
  options.rank = rank;
  options.world_size = world;
  options.chunk_bytes = mode.chunk;
  options.direct_copy = mode.direct_min != kStaged;
  options.direct_min_bytes = std::max<int64_t>(mode.direct_min, 1);
  options.connect_timeout = absl::Seconds(20);
  return options;
}

// ---- Ranks as threads.

using testing::RankFn;
using testing::RunAll;
using testing::RunRanks;
using testing::ThreadGroup;

// The ranks of one group, one thread each, moving payloads as `mode` says.
absl::StatusOr<ThreadGroup> MakeGroup(int world, Mode mode = {}, const std::string& name = "") {
  return testing::MakeShmThreadGroup(world, Options(name, 0, world, mode));
}

class ShmThreadsConformanceTest : public ::testing::TestWithParam<std::tuple<int, Mode>> {};

TEST_P(ShmThreadsConformanceTest, EveryOpMatchesTheReference) {
  const auto [world, mode] = GetParam();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  absl::StatusOr<ThreadGroup> group = MakeGroup(world, mode);
  ASSERT_THAT(group, IsOk());
  for (const absl::Status& s : RunAll(*group, [&](Communicator& comm) {
         return testing::RunConformance(comm, seed, /*rounds=*/4);
       })) {
    EXPECT_THAT(s, IsOk());
  }
}

// Staged in many rounds, the defaults, and every payload read in place.
INSTANTIATE_TEST_SUITE_P(WorldsAndModes, ShmThreadsConformanceTest,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8),
                                            ::testing::Values(Mode{kSmallChunk, kStaged},
                                                              Mode{4096, kAlwaysDirect})));

TEST(ShmCommunicatorTest, NameIsUnlinkedOnceEveryRankAttached) {
  const std::string name = FreshName("unlinked");
  absl::StatusOr<ThreadGroup> group = MakeGroup(3, {4096}, name);
  ASSERT_THAT(group, IsOk());
  EXPECT_FALSE(NameExists(name));
  for (const absl::Status& s :
       RunAll(*group, [](Communicator& comm) { return comm.Barrier(Tag("still works")); })) {
    EXPECT_THAT(s, IsOk());
  }
}

TEST(ShmCommunicatorTest, OtherTagSizeRootOrReduceOpIsADesync) {
  struct Case {
    RankFn rank0, others;
    std::string want;
  };
  auto reduce = [](int64_t n, ReduceOp op, absl::string_view tag) {
    return RankFn([=](Communicator& comm) {
      std::vector<int64_t> v(n, 1);
      return comm.AllReduce(absl::MakeSpan(v), op, Tag(tag));
    });
  };
  auto broadcast = [](int root) {
    return RankFn([=](Communicator& comm) {
      std::string data = "x";
      return comm.Broadcast(&data, root, Tag("intake"));
    });
  };
  const std::vector<Case> cases = {
      {reduce(1, ReduceOp::kSum, "a"), reduce(1, ReduceOp::kSum, "b"),
       "rank 0 called AllReduce('a') with 1 elements (sum), rank 1 called AllReduce('b')"},
      {reduce(4, ReduceOp::kSum, "v"), reduce(3, ReduceOp::kSum, "v"),
       "rank 0 called AllReduce('v') with 4 elements (sum), rank 1 called AllReduce('v') with 3 "
       "elements (sum)"},
      {reduce(2, ReduceOp::kMax, "v"), reduce(2, ReduceOp::kMin, "v"), "(max), rank 1"},
      {broadcast(0), broadcast(1),
       "Broadcast('intake') with root 0, rank 1 called "
       "Broadcast('intake') with root 1"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ThreadGroup> group = MakeGroup(3);
    ASSERT_THAT(group, IsOk());
    for (const absl::Status& s : RunRanks(*group, {c.rank0, c.others, c.others})) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal, HasSubstr(c.want)));
    }
  }
}

TEST(ShmCommunicatorTest, MissingPeerTimesOutTheBootstrapAndLeavesNoName) {
  const std::string name = FreshName("lonely");
  ShmOptions options = Options(name, 0, 2);
  options.connect_timeout = absl::Milliseconds(100);
  EXPECT_THAT(ShmCommunicator::Create(options),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("rank(s) 1 did not attach")));
  EXPECT_FALSE(NameExists(name));
}

TEST(ShmCommunicatorTest, ANewEpochNeverSeesTheOldSegment) {
  // A crashed launch left its segment behind, mid-run: every slot attached, far along.
  const std::string old_name = FreshName("epoch1");
  auto stale = internal::ShmSegment::Create(old_name, 2, 4096);
  ASSERT_THAT(stale, IsOk());
  for (int r = 0; r < 2; ++r) {
    (*stale)->control(r).seq.store(1001);
    (*stale)->control(r).state.store(static_cast<uint32_t>(internal::ShmRankState::kAttached));
  }
  // Its name is never reused: a group under the old epoch cannot even be created.
  ShmOptions reuse = Options(old_name, 0, 2);
  reuse.connect_timeout = absl::Milliseconds(50);
  EXPECT_THAT(ShmCommunicator::Create(reuse), StatusIs(absl::StatusCode::kAlreadyExists));
  // The relaunch, under a new epoch, starts from scratch.
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  absl::StatusOr<ThreadGroup> group = MakeGroup(2, {4096}, FreshName("epoch2"));
  ASSERT_THAT(group, IsOk());
  EXPECT_EQ(static_cast<ShmCommunicator&>(*(*group)[0]).rounds_published(), 0u);
  for (const absl::Status& s : RunAll(*group, [&](Communicator& comm) {
         return testing::RunConformance(comm, seed, /*rounds=*/1);
       })) {
    EXPECT_THAT(s, IsOk());
  }
  EXPECT_EQ((*stale)->control(0).seq.load(), 1001u);  // Untouched.
  EXPECT_THAT(UnlinkShmSegment(old_name), IsOk());    // What the next bootstrap does.
  EXPECT_FALSE(NameExists(old_name));
}

// ---- Ranks as processes. args: segment name, seed, chunk bytes, direct_min.

struct RankArgs {
  std::string name;
  uint64_t seed = 1;
  Mode mode;
};

RankArgs ParseArgs(const RankProcessRole& role) {
  RankArgs args;
  args.name = role.args.at(0);
  if (role.args.size() > 1) (void)absl::SimpleAtoi(role.args[1], &args.seed);
  if (role.args.size() > 2) (void)absl::SimpleAtoi(role.args[2], &args.mode.chunk);
  if (role.args.size() > 3) (void)absl::SimpleAtoi(role.args[3], &args.mode.direct_min);
  return args;
}

absl::Status Expect(bool condition, absl::string_view what, const absl::Status& status) {
  if (condition) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("expected ", what, ", got ", status.ToString()));
}

// A dead peer's deadline (the collective's or the join's), and the bound within which
// the survivors must have noticed: far below it, so that a liveness check that only
// fired at the deadline fails the test, and far above the 10 ms liveness_interval, so
// that a loaded machine does not.
constexpr absl::Duration kDeadPeerDeadline = absl::Seconds(30);
constexpr absl::Duration kDetectionBound = absl::Seconds(5);

// Prints how long rank `rank` took to see `status`, and fails past kDetectionBound.
absl::Status ExpectDetectedInTime(int rank, absl::Duration took, const absl::Status& status) {
  std::fprintf(stderr, "rank %d after %s: %s\n", rank, absl::FormatDuration(took).c_str(),
               status.ToString().c_str());
  return Expect(took < kDetectionBound,
                absl::StrCat("the dead peer noticed within ", absl::FormatDuration(kDetectionBound),
                             " (deadline ", absl::FormatDuration(kDeadPeerDeadline), "), took ",
                             absl::FormatDuration(took)),
                status);
}

absl::Status RunConformanceRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  ASSIGN_OR_RETURN(auto comm, ShmCommunicator::Create(
                                  Options(args.name, role.rank, role.world_size, args.mode)));
  return testing::RunConformance(*comm, args.seed, /*rounds=*/3);
}

// Two groups in the same processes, used concurrently (executor and engine threads).
absl::Status RunTwoGroupsRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  ASSIGN_OR_RETURN(auto executor, ShmCommunicator::Create(Options(args.name + "-exec", role.rank,
                                                                  role.world_size, {4096})));
  ASSIGN_OR_RETURN(auto engine,
                   ShmCommunicator::Create(Options(args.name + "-engine", role.rank,
                                                   role.world_size, {kSmallChunk, kAlwaysDirect})));
  absl::Status engine_status;
  std::thread engine_thread(
      [&] { engine_status = testing::RunConformance(*engine, args.seed + 1, /*rounds=*/3); });
  absl::Status executor_status = testing::RunConformance(*executor, args.seed, /*rounds=*/3);
  engine_thread.join();
  RETURN_IF_ERROR(executor_status);
  return engine_status;
}

// The last rank SIGKILLs itself in the middle of an all-to-all-v: staged in many
// rounds, once it has published 3 of them; direct, once it has published round 0
// (peers may be reading its memory). The others must see Unavailable naming it, not
// wait for their 30 s deadline: they must notice within kDetectionBound.
absl::Status RunSigkillRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  const int world = role.world_size;
  const uint64_t rounds_before_death = args.mode.direct_min == kStaged ? 3 : 1;
  ASSIGN_OR_RETURN(auto comm,
                   ShmCommunicator::Create(Options(args.name, role.rank, world, args.mode)));
  RETURN_IF_ERROR(comm->Barrier(Tag("ready")));
  const int64_t per_peer = 4096;  // floats: 16 KiB per peer, 16 rounds of 4 KiB at 4 ranks
  std::vector<float> send(per_peer * world, 1.0f);
  std::vector<float> recv(per_peer * world);
  const std::vector<int64_t> counts(world, per_peer);
  std::thread killer;
  if (role.rank == world - 1) {
    const uint64_t start = comm->rounds_published();
    killer = std::thread([&comm, start, rounds_before_death] {
      while (comm->rounds_published() < start + rounds_before_death) sched_yield();
      raise(SIGKILL);
    });
  }
  const absl::Time begin = absl::Now();
  for (int call = 0; call < 100; ++call) {
    absl::Status status =
        comm->AllToAllV(send, counts, absl::MakeSpan(recv), counts, Tag("moe", kDeadPeerDeadline));
    if (status.ok()) continue;  // The death may come in a later call.
    RETURN_IF_ERROR(
        Expect(absl::IsUnavailable(status) &&
                   absl::StrContains(status.message(), absl::StrCat("rank ", world - 1, " (pid")),
               "Unavailable naming the dead rank", status));
    RETURN_IF_ERROR(ExpectDetectedInTime(role.rank, absl::Now() - begin, status));
    absl::Status again = comm->Barrier(Tag("after"));
    return Expect(absl::IsFailedPrecondition(again), "FailedPrecondition", again);
  }
  if (killer.joinable()) killer.join();
  return absl::InternalError("the dead rank was never noticed");
}

// Rank 1 attaches to its slot by hand (what Attach writes: its pid, then kAttached)
// and SIGKILLs itself before the join completes, while rank 2 stays away (`peer_joins`
// false: rank 0 waits for every rank to attach) or joins once rank 1 has attached (rank
// 1 dies once every rank attached; ranks 0 and 2 then wait for its verdict on reading
// its peers' memory, which never comes). The waiting ranks must fail with Unavailable
// naming rank 1 within kDetectionBound, not at their connect_timeout.
absl::Status RunJoinDeathRank(const RankProcessRole& role, bool peer_joins) {
  const RankArgs args = ParseArgs(role);
  ShmOptions options = Options(args.name, role.rank, role.world_size);
  options.connect_timeout = kDeadPeerDeadline;
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  if (role.rank == 1) {
    ASSIGN_OR_RETURN(auto segment,
                     internal::ShmSegment::Open(args.name, role.world_size, deadline));
    internal::ShmSlotControl& mine = segment->control(1);
    mine.pid.store(static_cast<int32_t>(getpid()));
    mine.state.store(static_cast<uint32_t>(internal::ShmRankState::kAttached));
    auto attached = [&](int r) {
      return segment->control(r).state.load() ==
             static_cast<uint32_t>(internal::ShmRankState::kAttached);
    };
    while (peer_joins && !(attached(0) && attached(2)) && absl::Now() < deadline) sched_yield();
    raise(SIGKILL);
  }
  if (role.rank == 2 && !peer_joins) return absl::OkStatus();
  const std::string want =
      absl::StrCat("exited before every rank ", peer_joins ? "probe its peers" : "attach");
  const absl::Time begin = absl::Now();
  absl::Status status = ShmCommunicator::Create(options).status();
  RETURN_IF_ERROR(Expect(absl::IsUnavailable(status) &&
                             absl::StrContains(status.message(), "rank 1 (pid") &&
                             absl::StrContains(status.message(), want),
                         absl::StrCat("Unavailable naming rank 1 and '", want, "'"), status));
  return ExpectDetectedInTime(role.rank, absl::Now() - begin, status);
}

int RunRank(const RankProcessRole& role) {
  absl::Status status = absl::InvalidArgumentError("unknown scenario " + role.scenario);
  if (role.scenario == "conformance") status = RunConformanceRank(role);
  if (role.scenario == "two_groups") status = RunTwoGroupsRank(role);
  if (role.scenario == "sigkill") status = RunSigkillRank(role);
  if (role.scenario == "join_death_attach") status = RunJoinDeathRank(role, false);
  if (role.scenario == "join_death_probe") status = RunJoinDeathRank(role, true);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d of '%s' failed: %s\n", role.rank, role.scenario.c_str(),
                 status.ToString().c_str());
  }
  return status.ok() ? 0 : 1;
}

constexpr absl::Duration kRunTimeout = absl::Seconds(45);

void ExpectAllExitedZero(const absl::StatusOr<std::vector<testing::RankExit>>& exits) {
  ASSERT_THAT(exits, IsOk());
  for (size_t r = 0; r < exits->size(); ++r) {
    const testing::RankExit& exit = (*exits)[r];
    EXPECT_TRUE(exit.exited && exit.exit_code == 0)
        << "rank " << r << ": " << testing::DescribeExit(exit) << " (its stderr is above)";
  }
}

std::vector<std::string> ProcessArgs(absl::string_view what, Mode mode = {}) {
  return {FreshName(what), absl::StrCat(TestSeed()), absl::StrCat(mode.chunk),
          absl::StrCat(mode.direct_min)};
}

class ShmProcessConformanceTest : public ::testing::TestWithParam<std::tuple<int, Mode>> {};

TEST_P(ShmProcessConformanceTest, EveryOpMatchesTheReference) {
  const auto [world, mode] = GetParam();
  SCOPED_TRACE(SeedTrace(TestSeed()));
  const std::vector<std::string> args = ProcessArgs("conformance", mode);
  ExpectAllExitedZero(testing::RunRankProcesses("conformance", world, args, kRunTimeout));
  EXPECT_FALSE(NameExists(args[0]));
}

// Direct reads across processes (process_vm_readv) at 2 and 8 ranks, staged at 4.
INSTANTIATE_TEST_SUITE_P(Worlds, ShmProcessConformanceTest,
                         ::testing::Values(std::tuple{1, Mode{}},
                                           std::tuple{2, Mode{4096, kAlwaysDirect}},
                                           std::tuple{4, Mode{kSmallChunk, kStaged}},
                                           std::tuple{8, Mode{kSmallChunk, kAlwaysDirect}}));

TEST(ShmProcessTest, TwoGroupsInTheSameProcessesStayIndependent) {
  SCOPED_TRACE(SeedTrace(TestSeed()));
  ExpectAllExitedZero(testing::RunRankProcesses("two_groups", 3, ProcessArgs("two"), kRunTimeout));
}

class ShmSigkillTest : public ::testing::TestWithParam<Mode> {};

TEST_P(ShmSigkillTest, SigkilledPeerMidCollectiveIsUnavailableOnTheSurvivors) {
  absl::StatusOr<std::vector<testing::RankExit>> exits =
      testing::RunRankProcesses("sigkill", 4, ProcessArgs("sigkill", GetParam()), kRunTimeout);
  ASSERT_THAT(exits, IsOk());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE((*exits)[r].exited && (*exits)[r].exit_code == 0)
        << "rank " << r << ": " << testing::DescribeExit((*exits)[r]);
  }
  EXPECT_EQ((*exits)[3].signal, SIGKILL) << testing::DescribeExit((*exits)[3]);
}

INSTANTIATE_TEST_SUITE_P(StagedAndDirect, ShmSigkillTest,
                         ::testing::Values(Mode{4096, kStaged}, Mode{4096, kAlwaysDirect}));

// A rank that dies during the join, while its peers wait for the others to attach or
// for its probe verdict: see RunJoinDeathRank.
class ShmJoinDeathTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShmJoinDeathTest, PeerKilledDuringTheJoinIsUnavailableBeforeTheDeadline) {
  const std::vector<std::string> args = ProcessArgs("joindeath");
  absl::StatusOr<std::vector<testing::RankExit>> exits =
      testing::RunRankProcesses(GetParam(), 3, args, kRunTimeout);
  ASSERT_THAT(exits, IsOk());
  for (int r : {0, 2}) {
    EXPECT_TRUE((*exits)[r].exited && (*exits)[r].exit_code == 0)
        << "rank " << r << ": " << testing::DescribeExit((*exits)[r]) << " (its stderr is above)";
  }
  EXPECT_EQ((*exits)[1].signal, SIGKILL) << testing::DescribeExit((*exits)[1]);
  EXPECT_FALSE(NameExists(args[0]));
}

INSTANTIATE_TEST_SUITE_P(AttachAndProbe, ShmJoinDeathTest,
                         ::testing::Values("join_death_attach", "join_death_probe"));

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

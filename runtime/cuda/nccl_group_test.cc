// NcclGroup against NCCL (a GPU check: skips without a device). World 1 runs in this
// process; worlds of 2 and 4 run one rank per process (runtime/comm/testing/
// rank_processes.h), meeting through a rendezvous service this process hosts, and skip
// with fewer GPUs than ranks (NCCL rejects one device twice in a communicator). On the
// CPU execution layer every world runs, and a peer is killed in the middle of an
// operation by the layer's fault injection (LOCKSTEP_NCCL_CPU_FAULTS).
#include "runtime/cuda/nccl_group.h"

#include <cuda_runtime.h>  // cudaMalloc(T**)

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/comm/rendezvous_service.h"
#include "runtime/comm/testing/conformance.h"
#include "runtime/comm/testing/rank_processes.h"
#include "runtime/cuda/gpu_test_env.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;

NcclGroupOptions Solo(int world) {
  NcclGroupOptions options;
  options.name = "nccl_group_test/solo";
  options.world_size = world;
  options.buffer_bytes = size_t{1} << 20;
  return options;
}

// ncclCommGetAsyncError failing (e.g. on an invalid communicator) leaves the state
// unwritten: the bootstrap poll must see that failure, not a ready communicator. Runs
// without a GPU (fake getters, no NCCL call).
ncclResult_t FailsWithoutState(ncclComm_t, ncclResult_t*) { return ncclInvalidArgument; }
ncclResult_t StillInProgress(ncclComm_t, ncclResult_t* state) {
  *state = ncclInProgress;
  return ncclSuccess;
}
ncclResult_t Ready(ncclComm_t, ncclResult_t* state) {
  *state = ncclSuccess;
  return ncclSuccess;
}

TEST(NcclGroupTest, AsyncStateCountsAFailedQuery) {
  EXPECT_EQ(NcclAsyncState(nullptr, FailsWithoutState), ncclInvalidArgument);
  EXPECT_EQ(NcclAsyncState(nullptr, StillInProgress), ncclInProgress);
  EXPECT_EQ(NcclAsyncState(nullptr, Ready), ncclSuccess);
}

TEST(NcclGroupTest, WorldOfOnePassesTheConformanceSuite) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  auto comm = CreateNcclCommunicator(Solo(1));
  ASSERT_THAT(comm, IsOk());
  EXPECT_THAT(comm::testing::RunConformance(**comm, seed, /*rounds=*/4), IsOk());
}

TEST(NcclGroupTest, MissingPeerTimesOutTheBootstrapAndTheAbortReturns) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  NcclGroupOptions options = Solo(2);  // Rank 1 never comes.
  options.bootstrap_timeout = absl::Seconds(3);
  const absl::Time start = absl::Now();
  EXPECT_THAT(NcclGroup::Create(options), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_LT(absl::Now() - start, options.bootstrap_timeout + absl::Seconds(1));
}

TEST(NcclGroupTest, TheVoteTakesMicroseconds) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  auto comm = CreateNcclCommunicator(Solo(1));
  ASSERT_THAT(comm, IsOk());
  comm::CallOptions options;
  options.tag = "vote";
  constexpr int kVotes = 2000;
  std::vector<absl::Duration> times;
  for (int i = 0; i < kVotes; ++i) {
    int64_t vote[4] = {i, 1, 0, -i};
    const absl::Time start = absl::Now();
    ASSERT_THAT((*comm)->AllReduce(absl::MakeSpan(vote), comm::ReduceOp::kMax, options), IsOk());
    times.push_back(absl::Now() - start);
    ASSERT_EQ(vote[0], i);
  }
  std::sort(times.begin(), times.end());
  // A record for docs/perf.md, not an assertion on speed.
  RecordProperty("vote_p50_us", absl::ToInt64Microseconds(times[kVotes / 2]));
  std::printf("NCCL world-1 vote (4 int64, max): p50 %s, p99 %s\n",
              absl::FormatDuration(times[kVotes / 2]).c_str(),
              absl::FormatDuration(times[kVotes * 99 / 100]).c_str());
}

TEST(NcclGroupTest, DeviceAllToAllVIsStreamOrderedOnDeviceMemory) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  auto group = NcclGroup::Create(Solo(1));
  ASSERT_THAT(group, IsOk());
  const std::vector<float> host = {1.5f, -2.0f, 3.25f};
  float* send = nullptr;
  float* recv = nullptr;
  ASSERT_EQ(cudaMalloc(&send, sizeof(float) * host.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&recv, sizeof(float) * host.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(send, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  const std::vector<int64_t> counts = {static_cast<int64_t>(host.size())};
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  ASSERT_THAT((*group)->DeviceAllToAllV(send, counts, recv, counts, ncclFloat32, deadline), IsOk());
  std::vector<float> got(host.size());
  ASSERT_EQ(cudaMemcpyAsync(got.data(), recv, sizeof(float) * got.size(), cudaMemcpyDeviceToHost,
                            (*group)->stream()),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize((*group)->stream()), cudaSuccess);
  EXPECT_EQ(got, host);
  cudaFree(send);
  cudaFree(recv);
}

TEST(NcclGroupTest, DeviceAllToAllVRefusesNegativeCountsAndUnknownTypes) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  auto group = NcclGroup::Create(Solo(1));
  ASSERT_THAT(group, IsOk());
  float* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, sizeof(float)), cudaSuccess);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  const std::vector<int64_t> one = {1};
  const std::vector<int64_t> negative = {-1};
  EXPECT_THAT((*group)->DeviceAllToAllV(buffer, negative, buffer, one, ncclFloat32, deadline),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((*group)->DeviceAllToAllV(buffer, one, buffer, negative, ncclFloat32, deadline),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((*group)->DeviceAllToAllV(buffer, one, buffer, one,
                                        static_cast<ncclDataType_t>(ncclNumTypes), deadline),
              StatusIs(absl::StatusCode::kInvalidArgument));
  cudaFree(buffer);
}

// ---- Worlds of 2 and 4, one rank per process. args: the rendezvous address, the seed.

using comm::testing::RankExit;
using comm::testing::RankProcessRole;

struct RankArgs {
  std::string address;
  uint64_t seed = 1;
};

RankArgs ParseArgs(const RankProcessRole& role) {
  RankArgs args;
  args.address = role.args.at(0);
  if (role.args.size() > 1) (void)absl::SimpleAtoi(role.args[1], &args.seed);
  return args;
}

absl::Status Expect(bool condition, absl::string_view what, const absl::Status& status) {
  if (condition) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("expected ", what, ", got ", status.ToString()));
}

NcclGroupOptions RankOptions(const RankProcessRole& role, comm::RendezvousClient& rendezvous,
                             absl::string_view group = "") {
  NcclGroupOptions options;
  options.name = absl::StrCat("nccl_group_test/", role.scenario, group);
  options.rank = role.rank;
  options.world_size = role.world_size;
  options.local_rank = role.rank;
  options.rendezvous = &rendezvous;
  options.uid_key = absl::StrCat(role.scenario, group, "/nccl/uid");
  options.buffer_bytes = size_t{1} << 20;
  options.bootstrap_timeout = absl::Seconds(30);
  return options;
}

std::unique_ptr<comm::RendezvousClient> Connect(const RankArgs& args) {
  return comm::RendezvousClient::Connect(args.address, "nccl_group_test");
}

// The Communicator over NCCL against the reference: all-gathers, broadcasts and
// grouped sends and receives (self included) of every size the suite draws.
absl::Status RunConformanceRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  auto rendezvous = Connect(args);
  ASSIGN_OR_RETURN(auto comm, CreateNcclCommunicator(RankOptions(role, *rendezvous)));
  return comm::testing::RunConformance(*comm, args.seed, /*rounds=*/3);
}

// The executor's and the engine's groups in the same processes, on the same devices,
// used at the same time from two threads: each must stay correct and neither may
// block the other.
absl::Status RunTwoGroupsRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  auto rendezvous = Connect(args);
  ASSIGN_OR_RETURN(auto executor, CreateNcclCommunicator(RankOptions(role, *rendezvous, "-exec")));
  ASSIGN_OR_RETURN(auto engine, CreateNcclCommunicator(RankOptions(role, *rendezvous, "-engine")));
  absl::Status engine_status;
  std::thread engine_thread(
      [&] { engine_status = comm::testing::RunConformance(*engine, args.seed + 1, /*rounds=*/3); });
  const absl::Status executor_status =
      comm::testing::RunConformance(*executor, args.seed, /*rounds=*/3);
  engine_thread.join();
  RETURN_IF_ERROR(executor_status);
  return engine_status;
}

// The last rank gathers where the others vote: every rank sees the desync naming both
// calls (the header round meets every op), and the group is broken after it.
absl::Status RunDesyncRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  auto rendezvous = Connect(args);
  ASSIGN_OR_RETURN(auto comm, CreateNcclCommunicator(RankOptions(role, *rendezvous)));
  comm::CallOptions vote;
  vote.tag = "vote";
  comm::CallOptions responses;
  responses.tag = "responses";
  int64_t v = 1;
  const int last = role.world_size - 1;
  const absl::Status status =
      role.rank == last ? comm->Gather("x", 0, responses).status()
                        : comm->AllReduce(absl::MakeSpan(&v, 1), comm::ReduceOp::kSum, vote);
  RETURN_IF_ERROR(
      Expect(absl::IsInternal(status) &&
                 absl::StrContains(status.message(),
                                   "collective desync: rank 0 called AllReduce('vote')") &&
                 absl::StrContains(status.message(),
                                   absl::StrCat("rank ", last, " called Gather('responses')")),
             "Internal naming both calls", status));
  const absl::Status again = comm->AllReduce(absl::MakeSpan(&v, 1), comm::ReduceOp::kSum, vote);
  return Expect(absl::IsFailedPrecondition(again), "FailedPrecondition after the desync", again);
}

// Elements rank `from` sends rank `to` in round `round`: zero for some pairs, never
// zero to itself (NCCL copies a rank's block to itself).
int64_t Count(uint64_t seed, int round, int from, int to) {
  const int64_t count = static_cast<int64_t>((seed + round + 3 * from + 5 * to) % 5);
  return from == to ? count + 1 : count;
}

// Byte `b` of element `i` of the block rank `from` sends rank `to`.
char Byte(int from, int to, int64_t i, size_t b) {
  return static_cast<char>(from * 64 + to * 16 + i * 4 + static_cast<int64_t>(b));
}

// Every element width the engine may exchange, with its size in bytes.
struct Typed {
  ncclDataType_t type;
  size_t bytes;
};
constexpr Typed kTypes[] = {
    {ncclFloat32, 4},    {ncclBfloat16, 2}, {ncclInt64, 8}, {ncclUint8, 1},
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    {ncclFloat8e4m3, 1},
#endif
};

// The engine's MoE exchange on device memory: two rounds with other counts per
// element type, blocks at the offsets the element size gives.
absl::Status DeviceAllToAllVRounds(const RankProcessRole& role, NcclGroup* group) {
  const RankArgs args = ParseArgs(role);
  const int world = role.world_size;
  const int me = role.rank;
  constexpr size_t kMaxBytes = 8 * 5 * 4;  // 8-byte elements, at most 5 from each of 4 ranks
  char* send = nullptr;
  char* recv = nullptr;
  if (cudaMalloc(&send, kMaxBytes) != cudaSuccess || cudaMalloc(&recv, kMaxBytes) != cudaSuccess) {
    return absl::InternalError("cudaMalloc");
  }
  for (const Typed& typed : kTypes) {
    for (int round = 0; round < 2; ++round) {
      std::vector<int64_t> send_counts(world);
      std::vector<int64_t> recv_counts(world);
      std::string out;
      std::string want;
      for (int r = 0; r < world; ++r) {
        send_counts[r] = Count(args.seed, round, me, r);
        recv_counts[r] = Count(args.seed, round, r, me);
        for (int64_t i = 0; i < send_counts[r]; ++i) {
          for (size_t b = 0; b < typed.bytes; ++b) out.push_back(Byte(me, r, i, b));
        }
        for (int64_t i = 0; i < recv_counts[r]; ++i) {
          for (size_t b = 0; b < typed.bytes; ++b) want.push_back(Byte(r, me, i, b));
        }
      }
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      if (cudaMemcpy(send, out.data(), out.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
        return absl::InternalError("cudaMemcpy");
      }
      RETURN_IF_ERROR(
          group->DeviceAllToAllV(send, send_counts, recv, recv_counts, typed.type, deadline));
      std::string got(want.size(), '\0');
      if (cudaMemcpyAsync(got.data(), recv, got.size(), cudaMemcpyDeviceToHost, group->stream()) !=
          cudaSuccess) {
        return absl::InternalError("cudaMemcpyAsync");
      }
      RETURN_IF_ERROR(group->Sync(deadline));
      for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
          return absl::InternalError(absl::StrCat(
              "type ", typed.type, " (", typed.bytes, " bytes) round ", round, " rank ", me,
              ": byte ", i, " is ", int{got[i]}, ", expected ", int{want[i]}));
        }
      }
    }
  }
  cudaFree(send);
  cudaFree(recv);
  return absl::OkStatus();
}

absl::Status RunDeviceAllToAllVRank(const RankProcessRole& role) {
  auto rendezvous = Connect(ParseArgs(role));
  ASSIGN_OR_RETURN(std::unique_ptr<NcclGroup> group,
                   NcclGroup::Create(RankOptions(role, *rendezvous)));
  absl::Status status = DeviceAllToAllVRounds(role, group.get());
  if (!status.ok()) group->Abort();  // Peers may still be in the exchange.
  return status;
}

// The last rank never comes: the others' bootstrap fails and the abort that follows
// returns, within the bootstrap timeout (plus slack for a loaded machine). The first
// rank to reach its deadline sees DeadlineExceeded; its abort may reach the others
// first, which then see Unavailable (a peer failed) sooner.
constexpr absl::Duration kMissingPeerTimeout = absl::Seconds(3);

absl::Status RunMissingPeerRank(const RankProcessRole& role) {
  if (role.rank == role.world_size - 1) return absl::OkStatus();
  const RankArgs args = ParseArgs(role);
  auto rendezvous = Connect(args);
  NcclGroupOptions options = RankOptions(role, *rendezvous);
  options.bootstrap_timeout = kMissingPeerTimeout;
  const absl::Time start = absl::Now();
  const absl::Status status = NcclGroup::Create(options).status();
  const absl::Duration took = absl::Now() - start;
  std::fprintf(stderr, "rank %d after %s: %s\n", role.rank, absl::FormatDuration(took).c_str(),
               status.ToString().c_str());
  RETURN_IF_ERROR(Expect(absl::IsDeadlineExceeded(status) || absl::IsUnavailable(status),
                         "DeadlineExceeded or Unavailable", status));
  return Expect(took < kMissingPeerTimeout + absl::Seconds(2),
                absl::StrCat("back within ", absl::FormatDuration(kMissingPeerTimeout),
                             " and 2 s, took ", absl::FormatDuration(took)),
                status);
}

// The last rank stays alive but never enters the barrier: the others' call fails with
// DeadlineExceeded at its timeout (plus slack) and their abort returns; each then
// tells the rendezvous, and the last rank leaves once all have.
constexpr absl::Duration kStalledCallTimeout = absl::Seconds(2);

absl::Status RunStalledPeerRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  auto rendezvous = Connect(args);
  ASSIGN_OR_RETURN(auto comm, CreateNcclCommunicator(RankOptions(role, *rendezvous)));
  const int last = role.world_size - 1;
  if (role.rank == last) {
    std::vector<std::string> done;
    for (int r = 0; r < last; ++r) done.push_back(absl::StrCat("stalled/done/", r));
    return rendezvous->Wait(done, absl::Seconds(30));
  }
  comm::CallOptions barrier;
  barrier.tag = "step";
  barrier.timeout = kStalledCallTimeout;
  const absl::Time start = absl::Now();
  const absl::Status status = comm->Barrier(barrier);
  const absl::Duration took = absl::Now() - start;
  std::fprintf(stderr, "rank %d after %s: %s\n", role.rank, absl::FormatDuration(took).c_str(),
               status.ToString().c_str());
  RETURN_IF_ERROR(Expect(absl::IsDeadlineExceeded(status), "DeadlineExceeded", status));
  RETURN_IF_ERROR(Expect(took < kStalledCallTimeout + absl::Seconds(2),
                         absl::StrCat("back within ", absl::FormatDuration(kStalledCallTimeout),
                                      " and 2 s, took ", absl::FormatDuration(took)),
                         status));
  const absl::Status again = comm->Barrier(barrier);
  RETURN_IF_ERROR(Expect(absl::IsFailedPrecondition(again), "FailedPrecondition after it", again));
  comm.reset();  // The aborted group frees nothing and returns.
  return rendezvous->Set(absl::StrCat("stalled/done/", role.rank), "1");
}

// The last rank SIGKILLs itself in the middle of the payload of the first all-to-all-v
// (the layer's operation 3: the barrier's header, the call's header, its sends and
// receives, 256-byte chunks). The others must see Unavailable long before the call's
// deadline, and the communicator is broken after it (it aborted NCCL).
constexpr absl::Duration kDeadPeerDeadline = absl::Seconds(30);
constexpr absl::Duration kDetectionBound = absl::Seconds(5);

// With `fault` "error", the last rank's operation 3 fails with ncclSystemError
// instead: it and the others must see Unavailable just as soon.
absl::Status RunFaultedPeerRank(const RankProcessRole& role, absl::string_view fault) {
  const RankArgs args = ParseArgs(role);
  const int world = role.world_size;
  setenv("LOCKSTEP_NCCL_CPU_CHUNK_BYTES", "256", 1);
  setenv("LOCKSTEP_NCCL_CPU_FAULTS", absl::StrCat(fault, "@3:rank=", world - 1).c_str(), 1);
  auto rendezvous = Connect(args);
  ASSIGN_OR_RETURN(auto comm, CreateNcclCommunicator(RankOptions(role, *rendezvous)));
  comm::CallOptions ready;
  ready.tag = "ready";
  RETURN_IF_ERROR(comm->Barrier(ready));
  comm::CallOptions moe;
  moe.tag = "moe";
  moe.timeout = kDeadPeerDeadline;
  const int64_t per_peer = 1024;  // 4 KiB per peer: 16 chunks
  std::vector<float> send(per_peer * world, 1.0f);
  std::vector<float> recv(per_peer * world);
  const std::vector<int64_t> counts(world, per_peer);
  const absl::Time begin = absl::Now();
  const absl::Status status = comm->AllToAllV(send, counts, absl::MakeSpan(recv), counts, moe);
  const absl::Duration took = absl::Now() - begin;
  std::fprintf(stderr, "rank %d after %s: %s\n", role.rank, absl::FormatDuration(took).c_str(),
               status.ToString().c_str());
  RETURN_IF_ERROR(Expect(absl::IsUnavailable(status), "Unavailable", status));
  RETURN_IF_ERROR(
      Expect(took < kDetectionBound,
             absl::StrCat("the dead peer noticed within ", absl::FormatDuration(kDetectionBound),
                          ", took ", absl::FormatDuration(took)),
             status));
  const absl::Status again = comm->Barrier(ready);
  return Expect(absl::IsFailedPrecondition(again), "FailedPrecondition after the error", again);
}

// The last rank's all-to-all-v sends (1 MiB + 64 KiB) / (world - 1) floats' worth to each
// other rank: more than the 1 MiB buffers in total on that rank alone (the others
// receive less than 1 MiB each at world 4; at world 2, rank 0 receives all of it and is
// the first rank over). Every rank must refuse with ResourceExhausted naming the first
// rank over, at once, with its receive buffer untouched; the group is
// broken after it, as after any error.
absl::Status RunOversizedRank(const RankProcessRole& role) {
  const RankArgs args = ParseArgs(role);
  const int world = role.world_size;
  const int last = world - 1;
  auto rendezvous = Connect(args);
  ASSIGN_OR_RETURN(auto comm, CreateNcclCommunicator(RankOptions(role, *rendezvous)));
  const int64_t big = ((int64_t{1} << 20) + (int64_t{64} << 10)) / (world - 1) / 4;
  std::vector<int64_t> send_counts(world, 1);
  std::vector<int64_t> recv_counts(world, 1);
  if (role.rank == last) {
    for (int r = 0; r < last; ++r) send_counts[r] = big;
  } else {
    recv_counts[last] = big;
  }
  int64_t send_total = 0, recv_total = 0;
  for (int r = 0; r < world; ++r) {
    send_total += send_counts[r];
    recv_total += recv_counts[r];
  }
  const std::vector<float> send(send_total, 1.0f);
  std::vector<float> recv(recv_total, -7.0f);
  comm::CallOptions moe;
  moe.tag = "moe";
  moe.timeout = absl::Seconds(30);
  const absl::Time begin = absl::Now();
  const absl::Status status =
      comm->AllToAllV(send, send_counts, absl::MakeSpan(recv), recv_counts, moe);
  const absl::Duration took = absl::Now() - begin;
  std::fprintf(stderr, "rank %d after %s: %s\n", role.rank, absl::FormatDuration(took).c_str(),
               status.ToString().c_str());
  const int over = world == 2 ? 0 : last;
  RETURN_IF_ERROR(Expect(absl::IsResourceExhausted(status) &&
                             absl::StrContains(status.message(),
                                               absl::StrCat(": rank ", over, " would send")),
                         absl::StrCat("ResourceExhausted naming rank ", over), status));
  RETURN_IF_ERROR(Expect(took < absl::Seconds(5),
                         absl::StrCat("refused at once, took ", absl::FormatDuration(took)),
                         status));
  for (size_t i = 0; i < recv.size(); ++i) {
    if (recv[i] != -7.0f) {
      return absl::InternalError(absl::StrCat("rank ", role.rank, ": received float ", i,
                                              " although the call was refused"));
    }
  }
  const absl::Status again = comm->Barrier(moe);
  return Expect(absl::IsFailedPrecondition(again), "FailedPrecondition after it", again);
}

int RunRank(const RankProcessRole& role) {
  absl::Status status = absl::InvalidArgumentError("unknown scenario " + role.scenario);
  if (role.scenario == "conformance") status = RunConformanceRank(role);
  if (role.scenario == "stalled_peer") status = RunStalledPeerRank(role);
  if (role.scenario == "desync") status = RunDesyncRank(role);
  if (role.scenario == "two_groups") status = RunTwoGroupsRank(role);
  if (role.scenario == "device_alltoallv") status = RunDeviceAllToAllVRank(role);
  if (role.scenario == "missing_peer") status = RunMissingPeerRank(role);
  if (role.scenario == "killed_peer") status = RunFaultedPeerRank(role, "kill");
  if (role.scenario == "failed_peer") status = RunFaultedPeerRank(role, "error");
  if (role.scenario == "oversized") status = RunOversizedRank(role);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d of '%s' failed: %s\n", role.rank, role.scenario.c_str(),
                 status.ToString().c_str());
  }
  return status.ok() ? 0 : 1;
}

constexpr absl::Duration kRunTimeout = absl::Seconds(60);

// Runs `scenario` on `world` rank processes around a rendezvous service of this
// process; the ranks' exits, or an error.
absl::StatusOr<std::vector<RankExit>> RunWorld(absl::string_view scenario, int world) {
  ASSIGN_OR_RETURN(std::unique_ptr<comm::RendezvousServer> server, comm::RendezvousServer::Start());
  return comm::testing::RunRankProcesses(
      scenario, world, {server->address(), absl::StrCat(TestSeed())}, kRunTimeout);
}

void ExpectExitedZero(const std::vector<RankExit>& exits, int rank) {
  EXPECT_TRUE(exits[rank].exited && exits[rank].exit_code == 0)
      << "rank " << rank << ": " << comm::testing::DescribeExit(exits[rank])
      << " (its stderr is above)";
}

void ExpectAllExitedZero(const absl::StatusOr<std::vector<RankExit>>& exits) {
  ASSERT_THAT(exits, IsOk());
  for (size_t r = 0; r < exits->size(); ++r) ExpectExitedZero(*exits, r);
}

// A GPU per rank (NCCL refuses one device twice); the CPU layer has 8.
#define SKIP_WITHOUT_GPUS(world)                                                  \
  do {                                                                            \
    LOCKSTEP_SKIP_WITHOUT_GPU();                                                  \
    int devices = 0;                                                              \
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);                         \
    if (devices < (world)) GTEST_SKIP() << (world) << " ranks need as many GPUs"; \
  } while (false)

class NcclGroupWorldTest : public ::testing::TestWithParam<int> {};

TEST_P(NcclGroupWorldTest, CommunicatorPassesTheConformanceSuite) {
  SKIP_WITHOUT_GPUS(GetParam());
  SCOPED_TRACE(SeedTrace(TestSeed()));
  ExpectAllExitedZero(RunWorld("conformance", GetParam()));
}

TEST_P(NcclGroupWorldTest, OtherOpIsADesyncOnEveryRankAndBreaksTheGroup) {
  SKIP_WITHOUT_GPUS(GetParam());
  ExpectAllExitedZero(RunWorld("desync", GetParam()));
}

TEST_P(NcclGroupWorldTest, TwoGroupsInTheSameProcessesStayIndependent) {
  SKIP_WITHOUT_GPUS(GetParam());
  SCOPED_TRACE(SeedTrace(TestSeed()));
  ExpectAllExitedZero(RunWorld("two_groups", GetParam()));
}

TEST_P(NcclGroupWorldTest, DeviceAllToAllVWithSelfSends) {
  SKIP_WITHOUT_GPUS(GetParam());
  SCOPED_TRACE(SeedTrace(TestSeed()));
  ExpectAllExitedZero(RunWorld("device_alltoallv", GetParam()));
}

TEST_P(NcclGroupWorldTest, PeerThatNeverArrivesFailsTheBootstrapWithinItsDeadline) {
  SKIP_WITHOUT_GPUS(GetParam());
  ExpectAllExitedZero(RunWorld("missing_peer", GetParam()));
}

TEST_P(NcclGroupWorldTest, PeerThatNeverCallsTimesOutTheCallAndTheAbortReturns) {
  SKIP_WITHOUT_GPUS(GetParam());
  ExpectAllExitedZero(RunWorld("stalled_peer", GetParam()));
}

TEST_P(NcclGroupWorldTest, PeerKilledMidOperationIsUnavailableOnTheSurvivors) {
  SKIP_WITHOUT_GPUS(GetParam());
#ifndef LOCKSTEP_CUDA_CPU
  GTEST_SKIP() << "killing a rank mid-operation needs the CPU layer's fault injection";
#endif
  absl::StatusOr<std::vector<RankExit>> exits = RunWorld("killed_peer", GetParam());
  ASSERT_THAT(exits, IsOk());
  for (int r = 0; r + 1 < GetParam(); ++r) ExpectExitedZero(*exits, r);
  EXPECT_EQ(exits->back().signal, SIGKILL) << comm::testing::DescribeExit(exits->back());
}

TEST_P(NcclGroupWorldTest, PeerWhoseOperationFailsIsUnavailableEverywhere) {
  SKIP_WITHOUT_GPUS(GetParam());
#ifndef LOCKSTEP_CUDA_CPU
  GTEST_SKIP() << "failing a rank's operation needs the CPU layer's fault injection";
#endif
  ExpectAllExitedZero(RunWorld("failed_peer", GetParam()));
}

TEST_P(NcclGroupWorldTest, AnExchangeTooLargeForOneRankIsRefusedByEveryRank) {
  SKIP_WITHOUT_GPUS(GetParam());
  ExpectAllExitedZero(RunWorld("oversized", GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Worlds, NcclGroupWorldTest, ::testing::Values(2, 4));

}  // namespace
}  // namespace lockstep::cuda

int main(int argc, char** argv) {
  if (std::optional<lockstep::comm::testing::RankProcessRole> role =
          lockstep::comm::testing::GetRankProcessRole()) {
    return lockstep::cuda::RunRank(*role);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

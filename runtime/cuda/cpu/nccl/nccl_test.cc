// The NCCL layer across real processes (one rank per process, 2 to 4 ranks): every
// collective against expected values, grouped send/recv with self-sends, graph
// replay, nonblocking init, and the failure paths (a peer that never arrives, a peer
// killed mid-operation, mismatched calls, an injected async error). Children report
// failures on stderr and through their exit code.
#include <nccl.h>
#include <sys/stat.h>

#include <cuda_runtime.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cpu/nccl/comm.h"
#include "runtime/cuda/cpu/nccl/reduce.h"
#include "runtime/cuda/cpu/nccl/testing/rank_processes.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

using testing::NcclRankExit;
using testing::NcclRankRole;

constexpr absl::Duration kWait = absl::Seconds(60);    // any one wait in a child
constexpr absl::Duration kRanks = absl::Seconds(120);  // a whole multi-process run
// Small chunks: every message of a few KiB wraps the 4-slot rings several times.
const char kSmallChunks[] = "LOCKSTEP_NCCL_CPU_CHUNK_BYTES=256";

// ---- Children --------------------------------------------------------------------

// Collects a child's failures; the child exits 1 if there was any.
struct Checker {
  int rank = 0;
  int failures = 0;
  void Expect(bool ok, const std::string& what) {
    if (ok) return;
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
};

ncclUniqueId ParseId(const std::string& hex) {
  ncclUniqueId id;
  const std::string bytes = absl::HexStringToBytes(hex);
  std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  return id;
}

ncclResult_t AsyncState(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
  return state;
}

// Polls `done` until it holds or kWait passes (back-off: yield, then up to 1 ms).
bool PollUntil(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kWait;
  for (int i = 0; absl::Now() < deadline; ++i) {
    if (done()) return true;
    if (i < 100) {
      sched_yield();
    } else {
      absl::SleepFor(absl::Microseconds(std::min(1000, i)));
    }
  }
  return done();
}

// Initializes the communicator, blocking or not (then polling until it is ready).
ncclComm_t Init(const NcclRankRole& role, const std::string& id_hex, bool blocking,
                Checker& check) {
  ncclComm_t comm = nullptr;
  const ncclUniqueId id = ParseId(id_hex);
  if (blocking) {
    const ncclResult_t r = ncclCommInitRank(&comm, role.world, id, role.rank);
    check.Expect(r == ncclSuccess, absl::StrCat("ncclCommInitRank: ", ncclGetErrorString(r)));
    return comm;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nccl_test";
  const ncclResult_t r = ncclCommInitRankConfig(&comm, role.world, id, role.rank, &config);
  check.Expect(r == ncclInProgress || r == ncclSuccess,
               absl::StrCat("ncclCommInitRankConfig: ", ncclGetErrorString(r)));
  PollUntil([&] { return AsyncState(comm) != ncclInProgress; });
  check.Expect(
      AsyncState(comm) == ncclSuccess,
      absl::StrCat("init: ", ncclGetErrorString(AsyncState(comm)), ": ", ncclGetLastError(comm)));
  return comm;
}

// Waits for everything on `stream`, watching the communicator's async error.
bool Drain(ncclComm_t comm, cudaStream_t stream, Checker& check, const std::string& what) {
  ncclResult_t state = ncclSuccess;
  PollUntil([&] {
    state = AsyncState(comm);
    return state != ncclSuccess || cudaStreamQuery(stream) != cudaErrorNotReady;
  });
  const bool ok = state == ncclSuccess && cudaStreamQuery(stream) == cudaSuccess;
  check.Expect(ok,
               absl::StrCat(what, ": ", ncclGetErrorString(state), ": ", ncclGetLastError(comm)));
  return ok;
}

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  T* device = nullptr;
  cudaMalloc(&device, std::max<size_t>(host.size(), 1) * sizeof(T));
  if (!host.empty())
    cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return device;
}

template <typename T>
std::vector<T> HostCopy(const T* device, size_t n) {
  std::vector<T> host(n);
  if (n > 0) cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

// Every collective, grouped all-to-all with self-sends, and graph replay.
int RunCollectives(const NcclRankRole& role) {
  Checker check{role.rank};
  const int me = role.rank, world = role.world;
  ncclComm_t comm = Init(role, role.args.at(0), role.args.at(1) == "blocking", check);
  if (check.failures > 0) return 1;
  int count = 0, rank = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &rank);
  check.Expect(count == world && rank == me, "ncclCommCount / ncclCommUserRank");
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);

  {  // AllReduce float32 sum, out of place.
    const size_t n = 1000;
    auto value = [](int r, size_t i) { return 0.5f * (r + 1) + static_cast<float>(i); };
    std::vector<float> in(n), expected(n, 0.0f);
    for (size_t i = 0; i < n; ++i) {
      in[i] = value(me, i);
      for (int r = 0; r < world; ++r) expected[i] += value(r, i);
    }
    float* send = DeviceCopy(in);
    float* recv = DeviceCopy(std::vector<float>(n));
    ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, stream);
    if (Drain(comm, stream, check, "allreduce sum")) {
      check.Expect(HostCopy(recv, n) == expected, "allreduce float32 sum values");
    }
  }
  {  // AllReduce int64 max, in place.
    const size_t n = 777;
    auto value = [](int r, size_t i) {
      return static_cast<int64_t>((i * 7919 + r * 104729) % 1000) - 500;
    };
    std::vector<int64_t> in(n), expected(n, INT64_MIN);
    for (size_t i = 0; i < n; ++i) {
      in[i] = value(me, i);
      for (int r = 0; r < world; ++r) expected[i] = std::max(expected[i], value(r, i));
    }
    int64_t* buffer = DeviceCopy(in);
    ncclAllReduce(buffer, buffer, n, ncclInt64, ncclMax, comm, stream);
    if (Drain(comm, stream, check, "allreduce max")) {
      check.Expect(HostCopy(buffer, n) == expected, "allreduce int64 max values (in place)");
    }
  }
  {  // AllReduce bfloat16 sum: summed in float in rank order, rounded once.
    const size_t n = 300;
    auto value = [](int r, size_t i) { return FloatToBfloat16(0.1f * (r + 1) * (i % 17) - 0.7f); };
    std::vector<uint16_t> in(n), expected(n);
    for (size_t i = 0; i < n; ++i) {
      in[i] = value(me, i);
      float sum = 0.0f;
      for (int r = 0; r < world; ++r) sum += Bfloat16ToFloat(value(r, i));
      expected[i] = FloatToBfloat16(sum);
    }
    uint16_t* send = DeviceCopy(in);
    uint16_t* recv = DeviceCopy(std::vector<uint16_t>(n));
    ncclAllReduce(send, recv, n, ncclBfloat16, ncclSum, comm, stream);
    if (Drain(comm, stream, check, "allreduce bf16")) {
      check.Expect(HostCopy(recv, n) == expected, "allreduce bfloat16 sum values");
    }
  }
  {  // AllGather int32 out of place, then uint8 in place.
    const size_t n = 700;
    std::vector<int32_t> in(n), expected(n * world);
    for (size_t i = 0; i < n; ++i) in[i] = me * 100000 + static_cast<int32_t>(i);
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < n; ++i) expected[r * n + i] = r * 100000 + static_cast<int32_t>(i);
    }
    int32_t* send = DeviceCopy(in);
    int32_t* recv = DeviceCopy(std::vector<int32_t>(n * world, -1));
    ncclAllGather(send, recv, n, ncclInt32, comm, stream);
    if (Drain(comm, stream, check, "allgather")) {
      check.Expect(HostCopy(recv, n * world) == expected, "allgather int32 values");
    }
    const size_t m = 1001;
    std::vector<uint8_t> all(m * world, 0xEE), want(m * world);
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < m; ++i) want[r * m + i] = static_cast<uint8_t>(r * 31 + i);
    }
    for (size_t i = 0; i < m; ++i) all[me * m + i] = want[me * m + i];
    uint8_t* buffer = DeviceCopy(all);
    ncclAllGather(buffer + me * m, buffer, m, ncclUint8, comm, stream);
    if (Drain(comm, stream, check, "allgather in place")) {
      check.Expect(HostCopy(buffer, m * world) == want, "allgather uint8 values (in place)");
    }
  }
  {  // ReduceScatter float32 sum.
    const size_t n = 500;
    auto value = [](int r, size_t j) { return static_cast<float>(r * 3 + 1) * 0.25f + j; };
    std::vector<float> in(n * world), expected(n, 0.0f);
    for (size_t j = 0; j < n * world; ++j) in[j] = value(me, j);
    for (size_t i = 0; i < n; ++i) {
      for (int r = 0; r < world; ++r) expected[i] += value(r, me * n + i);
    }
    float* send = DeviceCopy(in);
    float* recv = DeviceCopy(std::vector<float>(n));
    ncclReduceScatter(send, recv, n, ncclFloat32, ncclSum, comm, stream);
    if (Drain(comm, stream, check, "reduce-scatter")) {
      check.Expect(HostCopy(recv, n) == expected, "reduce-scatter float32 sum values");
    }
  }
  {  // Broadcast from the last rank out of place, then from rank 0 in place.
    const size_t n = 1500;
    const int root = world - 1;
    std::vector<float> data(n), expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = 3.0f * i - 7.0f;
    if (me == root) data = expected;
    float* send = DeviceCopy(data);
    float* recv = DeviceCopy(std::vector<float>(n, -1.0f));
    ncclBroadcast(send, recv, n, ncclFloat32, root, comm, stream);
    if (Drain(comm, stream, check, "broadcast")) {
      check.Expect(HostCopy(recv, n) == expected, "broadcast float32 values");
    }
    const size_t m = 3000;
    std::vector<uint8_t> bytes(m, 0), want(m);
    for (size_t i = 0; i < m; ++i) want[i] = static_cast<uint8_t>(i * 13 + 5);
    if (me == 0) bytes = want;
    uint8_t* buffer = DeviceCopy(bytes);
    ncclBroadcast(buffer, buffer, m, ncclUint8, 0, comm, stream);
    if (Drain(comm, stream, check, "broadcast in place")) {
      check.Expect(HostCopy(buffer, m) == want, "broadcast uint8 values (in place)");
    }
  }
  {  // Grouped all-to-all-v with self-sends: s sends c(s, r) floats to every r.
    auto c = [](int s, int r) { return static_cast<size_t>(100 + 37 * s + 11 * r); };
    auto value = [](int s, int r, size_t i) { return s * 1e6f + r * 1e3f + i; };
    std::vector<float> out, expected;
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < c(me, r); ++i) out.push_back(value(me, r, i));
      for (size_t i = 0; i < c(r, me); ++i) expected.push_back(value(r, me, i));
    }
    float* send = DeviceCopy(out);
    float* recv = DeviceCopy(std::vector<float>(expected.size(), -1.0f));
    ncclGroupStart();
    size_t sent = 0, received = 0;
    for (int r = 0; r < world; ++r) {
      ncclSend(send + sent, c(me, r), ncclFloat32, r, comm, stream);
      ncclRecv(recv + received, c(r, me), ncclFloat32, r, comm, stream);
      sent += c(me, r);
      received += c(r, me);
    }
    const ncclResult_t end = ncclGroupEnd();
    check.Expect(end == ncclSuccess, "ncclGroupEnd");
    if (Drain(comm, stream, check, "grouped send/recv")) {
      check.Expect(HostCopy(recv, expected.size()) == expected, "all-to-all-v values");
    }
  }
  {  // An all-reduce captured into a graph reads its buffers at every replay.
    const size_t n = 600;
    int32_t* send = DeviceCopy(std::vector<int32_t>(n, 0));
    int32_t* recv = DeviceCopy(std::vector<int32_t>(n, 0));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check.Expect(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess,
                 "begin capture");
    ncclAllReduce(send, recv, n, ncclInt32, ncclSum, comm, stream);
    check.Expect(cudaStreamEndCapture(stream, &graph) == cudaSuccess, "end capture");
    check.Expect(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int replay = 1; replay <= 3 && check.failures == 0; ++replay) {
      std::vector<int32_t> in(n), expected(n, 0);
      for (size_t i = 0; i < n; ++i) {
        in[i] = replay * (me + 1) * static_cast<int32_t>(i);
        for (int r = 0; r < world; ++r) expected[i] += replay * (r + 1) * static_cast<int32_t>(i);
      }
      cudaMemcpy(send, in.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice);
      cudaGraphLaunch(exec, stream);
      if (Drain(comm, stream, check, absl::StrCat("graph replay ", replay))) {
        check.Expect(HostCopy(recv, n) == expected,
                     absl::StrCat("graph replay ", replay, " values"));
      }
    }
  }
  check.Expect(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
  return check.failures == 0 ? 0 : 1;
}

// Waits for the async error that the scenario expects, checks its text, checks that
// the stream's op is left incomplete, then aborts (which must release the stream).
int ExpectAsyncError(ncclComm_t comm, cudaStream_t stream, ncclResult_t expected,
                     const std::vector<std::string>& mentions, Checker& check) {
  PollUntil([&] { return AsyncState(comm) != ncclSuccess; });
  const ncclResult_t state = AsyncState(comm);
  const std::string text = ncclGetLastError(comm);
  check.Expect(state == expected,
               absl::StrCat("async error ", ncclGetErrorString(state), ", expected ",
                            ncclGetErrorString(expected), ": ", text));
  for (const std::string& word : mentions) {
    check.Expect(absl::StrContains(text, word), absl::StrCat("'", text, "' names ", word));
  }
  check.Expect(cudaStreamQuery(stream) == cudaErrorNotReady, "the failed op is left incomplete");
  check.Expect(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort");
  check.Expect(cudaStreamSynchronize(stream) == cudaSuccess, "the stream completes after abort");
  return check.failures == 0 ? 0 : 1;
}

// args: id, scenario detail. Runs one good all-reduce, then the failing one.
int RunFailure(const NcclRankRole& role) {
  Checker check{role.rank};
  ncclComm_t comm = Init(role, role.args.at(0), /*blocking=*/false, check);
  if (check.failures > 0) return 1;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const size_t n = 4000;  // 63 chunks of 256 bytes: the op needs every peer to move
  float* a = DeviceCopy(std::vector<float>(n, 1.0f));
  float* b = DeviceCopy(std::vector<float>(n, 0.0f));
  ncclAllReduce(a, b, 16, ncclFloat32, ncclSum, comm, stream);
  if (!Drain(comm, stream, check, "first all-reduce")) return 1;
  if (role.scenario == "mismatch") {
    if (role.rank == 0) {
      ncclAllReduce(a, b, 256, ncclFloat32, ncclSum, comm, stream);
    } else {
      ncclAllGather(a, b, 256, ncclFloat32, comm, stream);
    }
    return ExpectAsyncError(comm, stream, ncclInvalidUsage,
                            {"ncclAllReduce(256 x float32, sum)", "ncclAllGather(256 x float32)",
                             "rank 0", "rank 1", "operation #2"},
                            check);
  }
  ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, stream);
  if (role.scenario == "kill") {  // rank 1 is SIGKILLed by the injected fault
    return ExpectAsyncError(comm, stream, ncclRemoteError, {"rank 1", "exited"}, check);
  }
  // "error": rank 0 fails with the injected error, its peers see it as remote.
  if (role.rank == 0) {
    return ExpectAsyncError(comm, stream, ncclSystemError, {"injected fault error@2"}, check);
  }
  return ExpectAsyncError(comm, stream, ncclRemoteError, {"rank 0 failed", "error@2"}, check);
}

// Every rank gives up at the bootstrap deadline; rank 1 (never_arrive) never attached.
int RunNeverArrive(const NcclRankRole& role) {
  Checker check{role.rank};
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r =
      ncclCommInitRankConfig(&comm, role.world, ParseId(role.args.at(0)), role.rank, &config);
  check.Expect(r == ncclInProgress, "nonblocking init is in progress");
  PollUntil([&] { return AsyncState(comm) != ncclInProgress; });
  check.Expect(AsyncState(comm) == ncclSystemError, "the bootstrap times out");
  if (role.rank == 0) {
    const std::string text = ncclGetLastError(comm);
    check.Expect(absl::StrContains(text, "rank(s) 1 never arrived"), text);
  }
  check.Expect(ncclCommAbort(comm) == ncclSuccess, "ncclCommAbort");
  return check.failures == 0 ? 0 : 1;
}

int RunRank(const NcclRankRole& role) {
  if (role.scenario == "collectives") return RunCollectives(role);
  if (role.scenario == "never_arrive") return RunNeverArrive(role);
  return RunFailure(role);
}

// ---- The tests (the parent) --------------------------------------------------------

std::string NewIdHex(std::string* segment_name) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  UniqueId decoded;
  EXPECT_TRUE(DecodeUniqueId(id, &decoded));
  *segment_name = decoded.SegmentName();
  return absl::BytesToHexString(absl::string_view(id.internal, sizeof(id.internal)));
}

bool SegmentExists(const std::string& name) {
  struct stat st;
  return stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

void ExpectExits(const absl::StatusOr<std::vector<NcclRankExit>>& exits,
                 const std::vector<int>& killed = {}) {
  ASSERT_TRUE(exits.ok()) << exits.status();
  for (size_t r = 0; r < exits->size(); ++r) {
    const bool expect_kill = std::find(killed.begin(), killed.end(), r) != killed.end();
    const NcclRankExit& e = (*exits)[r];
    if (expect_kill) {
      EXPECT_EQ(e.signal, SIGKILL) << "rank " << r << ": " << testing::Describe(e);
    } else {
      EXPECT_TRUE(e.exited && e.exit_code == 0)
          << "rank " << r << ": " << testing::Describe(e) << " (its stderr is above)";
    }
  }
}

class NcclCollectivesTest : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(NcclCollectivesTest, EveryCollectiveMatchesTheExpectedValues) {
  const auto [world, mode] = GetParam();
  std::string segment;
  const std::string id = NewIdHex(&segment);
  ExpectExits(testing::RunNcclRanks("collectives", world, {id, mode}, {kSmallChunks}, kRanks));
  EXPECT_FALSE(SegmentExists(segment)) << segment << " was left in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(Worlds, NcclCollectivesTest,
                         ::testing::Values(std::tuple{2, "blocking"},
                                           std::tuple{4, "nonblocking"}));

TEST(NcclFailureTest, PeerKilledMidOperationIsARemoteErrorOnTheOthers) {
  std::string segment;
  const std::string id = NewIdHex(&segment);
  ExpectExits(
      testing::RunNcclRanks("kill", 3, {id},
                            {kSmallChunks, "LOCKSTEP_NCCL_CPU_FAULTS=kill@2:rank=1"}, kRanks),
      /*killed=*/{1});
}

TEST(NcclFailureTest, MismatchedCallsAreInvalidUsageNamingBoth) {
  std::string segment;
  const std::string id = NewIdHex(&segment);
  ExpectExits(testing::RunNcclRanks("mismatch", 2, {id}, {kSmallChunks}, kRanks));
}

TEST(NcclFailureTest, InjectedAsyncErrorFailsTheRankAndReachesItsPeers) {
  std::string segment;
  const std::string id = NewIdHex(&segment);
  ExpectExits(testing::RunNcclRanks(
      "error", 2, {id}, {kSmallChunks, "LOCKSTEP_NCCL_CPU_FAULTS=error@2:rank=0"}, kRanks));
}

TEST(NcclFailureTest, PeerThatNeverArrivesEndsTheBootstrapAtItsDeadline) {
  std::string segment;
  const std::string id = NewIdHex(&segment);
  ExpectExits(testing::RunNcclRanks(
      "never_arrive", 2, {id},
      {"LOCKSTEP_NCCL_CPU_FAULTS=never_arrive:rank=1", "LOCKSTEP_NCCL_CPU_BOOTSTRAP_TIMEOUT_S=2"},
      kRanks));
  EXPECT_FALSE(SegmentExists(segment)) << segment << " was left in /dev/shm";
}

// In this process: rank 0 of 2 waits for a rank 1 that never comes; the abort ends it.
TEST(NcclInitTest, AbortWhileAPeerNeverArrivesReturnsAndRemovesTheSegment) {
  std::string segment;
  const ncclUniqueId id = ParseId(NewIdHex(&segment));
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInProgress);
  EXPECT_EQ(AsyncState(comm), ncclInProgress);
  PollUntil([&] { return SegmentExists(segment); });  // the bootstrap is waiting
  EXPECT_EQ(AsyncState(comm), ncclInProgress);
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_FALSE(SegmentExists(segment));
}

TEST(NcclInitTest, BadArgumentsAreRefusedAtOnce) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_TRUE(absl::StrContains(ncclGetLastError(nullptr), "rank 2 of 2"))
      << ncclGetLastError(nullptr);
  ncclUniqueId garbage{};
  EXPECT_EQ(ncclCommInitRank(&comm, 1, garbage, 0), ncclInvalidArgument);
  ncclConfig_t config{};  // not from NCCL_CONFIG_INITIALIZER
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22809);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidUsage), "invalid usage");
}

// A world of one in this process: collectives are copies, a self-send a copy, and
// argument errors are synchronous.
TEST(NcclInitTest, WorldOfOneRunsEveryCallAsACopy) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  std::vector<float> host = {1.5f, -2.0f, 3.25f};
  float* a = DeviceCopy(host);
  float* b = DeviceCopy(std::vector<float>(3, 0.0f));
  ASSERT_EQ(ncclAllReduce(a, b, 3, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(HostCopy(b, 3), host);
  float* c = DeviceCopy(std::vector<float>(3, 0.0f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(a, 3, ncclFloat32, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclRecv(c, 3, ncclFloat32, 0, comm, stream), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(HostCopy(c, 3), host);
  EXPECT_EQ(ncclSend(a, 3, ncclFloat32, 1, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(a, b, 3, ncclFloat8e4m3, ncclSum, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(a, b, 3, ncclFloat32, ncclNumOps, comm, stream), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  ncclResult_t state = ncclInProgress;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  EXPECT_EQ(state, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace lockstep::cuda_cpu::nccl

int main(int argc, char** argv) {
  if (auto role = lockstep::cuda_cpu::nccl::testing::GetNcclRankRole()) {
    return lockstep::cuda_cpu::nccl::RunRank(*role);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

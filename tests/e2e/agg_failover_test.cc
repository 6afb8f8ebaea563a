// A rank killed mid-load (SIGKILL): the router marks its instance unhealthy within 5 s
// (by the "unhealthy since" time it reports on /health, not by the test's stopwatch),
// every request in flight on it ends with an error from the router (no client waits
// until its own deadline), the router stays up, and once the instance is relaunched it
// serves again, under a new epoch. Over shm (agg_failover_shm_test) the survivor sees
// its dead peer through the shared segment, and neither launch leaves a segment name
// behind.
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

std::string Yaml(const std::string& model_dir) {
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 1500
  health_check_interval_ms: 200
instances:
  - name: agg0
    role: aggregated
    world_size: 2
    engine: cpu
    # A leader whose loop stalls for 3 s reports "not progressing": the router's second
    # way to notice a broken instance, besides the leader exiting when a collective fails.
    executor: {max_batch_size: 4, max_num_tokens: 256, max_num_active_requests: 16,
               step_timeout_ms: 3000}
    kv: {tokens_per_block: 16, num_blocks: 512}
)",
                      CommSettings(kE2eComm));
}

// The epochs of `worker`'s launches, in order, from its log ("instance agg0 epoch E:
// connecting ...", one line per launch; the log is appended to across relaunches).
std::vector<std::string> LaunchEpochs(const launcher::LocalDeployment& d,
                                      const std::string& worker) {
  std::vector<std::string> epochs;
  for (absl::string_view line : absl::StrSplit(d.LogOf(worker), '\n')) {
    const size_t at = line.find("instance agg0 epoch ");
    if (at == absl::string_view::npos || !absl::StrContains(line, ": connecting")) continue;
    line.remove_prefix(at + std::string("instance agg0 epoch ").size());
    epochs.emplace_back(line.substr(0, line.find(':')));
  }
  return epochs;
}

// Whether /dev/shm holds a segment name of agg0's group `group` under `epoch`.
bool SegmentNameExists(const std::string& epoch, const std::string& group) {
  struct stat st;
  return stat(absl::StrCat("/dev/shm/lockstep-agg0-", epoch, "-", group).c_str(), &st) == 0;
}

// The router's "unhealthy since" time of `instance` on /health (Unix ms), or -1.
int64_t UnhealthySinceMs(const launcher::LocalDeployment& d, const std::string& instance) {
  const auto [status, body] = d.Get("/health");
  const nlohmann::json health = nlohmann::json::parse(body, nullptr, false);
  if (status != 200 || !health.is_object()) return -1;
  for (const nlohmann::json& entry : health.value("instances", nlohmann::json::array())) {
    if (entry.value("name", "") == instance && entry["unhealthy_since_ms"].is_number_integer()) {
      return entry["unhealthy_since_ms"].get<int64_t>();
    }
  }
  return -1;
}

TEST(AggFailoverTest, KilledRankFailsInFlightRequestsAndInstanceComesBack) {
  const std::string tmp = TestTmpDir();
  const std::string model = tmp + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
      launcher::LocalDeployment::Start(Yaml(model), tmp + "/run", LockstepBinary(),
                                       absl::Seconds(120));
  ASSERT_TRUE(started.ok()) << started.status();
  launcher::LocalDeployment& d = **started;
  EXPECT_EQ(CheckTransport(d, kE2eComm), "");
  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111, 32, 119, 111};

  // Long requests keep the instance busy while rank 1 is killed.
  std::atomic<int> ok{0}, errors{0}, client_deadlines{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      const launcher::GrpcResult r =
          d.Generate(prompt, 400, static_cast<uint64_t>(t), absl::Seconds(60));
      (r.error_code == 0 ? ok : errors)++;
      if (r.error_code == grpc::StatusCode::DEADLINE_EXCEEDED) ++client_deadlines;
      if (r.error_code != 0) std::cerr << "client " << t << ": " << r.error_message << "\n";
    });
  }
  // Once the requests are running on the instance, kill rank 1.
  ASSERT_TRUE(d.WaitFor([&] { return d.LoadOf("agg0") >= 3; }, absl::Seconds(30)));
  const pid_t rank1 = d.PidOf("agg0/rank1");
  ASSERT_GT(rank1, 0);
  const int64_t killed_ms = absl::ToUnixMillis(absl::Now());
  ASSERT_EQ(kill(rank1, SIGKILL), 0);

  // Unhealthy within 5 s of the kill, by the router's own record of when it noticed.
  int64_t since_ms = -1;
  ASSERT_TRUE(d.WaitFor(
      [&] {
        since_ms = UnhealthySinceMs(d, "agg0");
        return since_ms >= 0;
      },
      absl::Seconds(60)))
      << LogTails(d);
  std::cerr << "the router marked agg0 unhealthy " << since_ms - killed_ms
            << " ms after the kill\n";
  EXPECT_GE(since_ms, killed_ms) << "unhealthy before the kill?";
  EXPECT_LE(since_ms - killed_ms, 5000) << "router still routed to the dead instance";

  for (std::thread& t : clients) t.join();
  std::cerr << "clients: " << ok << " ok, " << errors << " errors\n";
  EXPECT_EQ(ok + errors, 6);
  EXPECT_GT(errors.load(), 0) << "requests in flight on the dead instance must fail";
  EXPECT_EQ(client_deadlines.load(), 0) << "a client waited until its own deadline";

  // The router is still up and refuses new requests cleanly while nothing is healthy.
  const auto [status, body] = d.Get("/health");
  EXPECT_EQ(status, 200) << body;
  const launcher::GrpcResult refused = d.Generate(prompt, 4, 1, absl::Seconds(10));
  EXPECT_NE(refused.error_code, 0);

  // Both ranks exited (the survivor cannot step without its peer); relaunch them.
  ASSERT_TRUE(d.WaitFor(
      [&] {
        d.Reap();
        return d.PidOf("agg0/rank0") < 0 && d.PidOf("agg0/rank1") < 0;
      },
      absl::Seconds(60)))
      << "rank 0 kept running without its peer";
  ASSERT_TRUE(d.RestartInstance("agg0").ok());
  ASSERT_TRUE(d.WaitHealthy(absl::Seconds(60)).ok());
  const launcher::GrpcResult again = d.Generate(prompt, 8, 5, absl::Seconds(60));
  EXPECT_EQ(again.error_code, 0) << again.error_message;
  EXPECT_EQ(again.tokens.size(), 8u);

  // The relaunch bootstrapped under a new epoch, on the same transport, on both ranks;
  // neither launch's segments are left in /dev/shm (unlinked once every rank attached).
  const std::vector<std::string> epochs = LaunchEpochs(d, "agg0/rank0");
  ASSERT_EQ(epochs.size(), 2u) << d.LogOf("agg0/rank0");
  std::cerr << "launches of agg0 over " << kE2eComm << ": epochs " << epochs[0] << ", " << epochs[1]
            << "\n";
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_EQ(LaunchEpochs(d, "agg0/rank1"), epochs);
  EXPECT_EQ(CheckTransport(d, kE2eComm), "");
  for (const std::string& epoch : epochs) {
    for (const char* group : {"exec", "engine"}) {
      EXPECT_FALSE(SegmentNameExists(epoch, group)) << "epoch " << epoch << " group " << group;
    }
  }
  if (::testing::Test::HasFailure()) std::cerr << LogTails(d);
}

}  // namespace
}  // namespace lockstep::e2e

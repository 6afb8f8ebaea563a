// `lockstep launch` with real processes: the launcher (run from a stand-in lockstep
// binary), a real router process, and fake worker ranks that register and heartbeat.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "common/host_port.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/process_supervisor.h"
#include "runtime/router/http/router_http_client.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/security/testing/test_certs.h"
#include "tools/cli/testing/process_test_util.h"

namespace lockstep::launcher {
namespace {

using ::lockstep::cli::testing::ChildrenOf;
using ::lockstep::cli::testing::FreshTestDirWithModel;
using ::lockstep::cli::testing::Slurp;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kDeadline = absl::Seconds(60);
constexpr absl::Duration kPoll = absl::Milliseconds(50);  // PollUntil interval

// Waits (bounded) until `pid` has exited.
bool AwaitGone(pid_t pid, absl::Duration timeout) {
  const int fd = OpenPidfd(pid);
  if (fd < 0) return errno == ESRCH;
  pollfd p = {fd, POLLIN, 0};
  const bool gone = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1;
  close(fd);
  return gone;
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDirWithModel();
    std::ofstream(dir_ / "deploy.yaml") << R"(
model: {name: tiny, path: model}
router: {heartbeat_interval_ms: 100, heartbeat_timeout_ms: 2000, health_check_interval_ms: 100}
instances:
  - {name: agg0, role: aggregated, world_size: 2, engine: fake}
)";
  }

  // Starts the launcher and waits for its endpoints; returns the router's HTTP address.
  std::string Launch(const std::vector<std::string>& extra_flags = {}) {
    const std::string binary = std::filesystem::absolute("tools/cli/fake_lockstep").string();
    const std::string run_dir = (dir_ / "run").string();
    launcher_log_ = (dir_ / "launcher.log").string();
    std::vector<std::string> argv = {binary,
                                     "launch",
                                     (dir_ / "deploy.yaml").string(),
                                     "--run-dir",
                                     run_dir,
                                     "--lockstep",
                                     binary,
                                     "--grace-s",
                                     "5",
                                     "--ready-timeout-s",
                                     "50"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    EXPECT_THAT(supervisor_.Start({"launcher", argv, launcher_log_}), IsOk());
    const std::string endpoints = run_dir + "/endpoints.json";
    EXPECT_THAT(
        supervisor_.WaitReady([&] { return std::filesystem::exists(endpoints); }, kDeadline),
        IsOk())
        << Slurp(launcher_log_);
    launcher_pid_ = supervisor_.PidOf("launcher");
    return json::parse(Slurp(endpoints), nullptr, false).value("http", "");
  }

  std::filesystem::path dir_;
  ProcessSupervisor supervisor_;
  std::string launcher_log_;
  pid_t launcher_pid_ = -1;
};

TEST_F(LauncherTest, ServesThenStopsEverythingOnSigterm) {
  const std::string http = Launch();
  ASSERT_FALSE(http.empty()) << Slurp(launcher_log_);
  std::map<pid_t, std::string> children = ChildrenOf(launcher_pid_);
  ASSERT_EQ(children.size(), 3u);  // router + two ranks

  const HostPort endpoint = ParseHostPort(http).value();
  httplib::Client client(endpoint.host, endpoint.port);
  client.set_read_timeout(20, 0);
  httplib::Result result =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": "launched", "max_tokens": 4})",
                  "application/json");
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body)["choices"][0]["text"],
            router::testing::FakeWorker::ExpectedText("launched", 4));
  EXPECT_THAT(Slurp(launcher_log_), HasSubstr("OpenAI API  http://" + http));

  ASSERT_EQ(kill(launcher_pid_, SIGTERM), 0);
  ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
  ASSERT_EQ(done.exited.size(), 1u);
  EXPECT_EQ(done.exited[0].exit_code, 0) << Slurp(launcher_log_);
  for (const auto& [pid, cmdline] : children) EXPECT_TRUE(AwaitGone(pid, kDeadline)) << cmdline;
  EXPECT_THAT(Slurp(launcher_log_), HasSubstr("stopped"));
  EXPECT_THAT(Slurp((dir_ / "run" / "router.log").string()), HasSubstr("lockstep router: http"));
}

// With router.https_cert_file the launcher polls /health over HTTPS (checked against
// router.https_ca_file) and prints the https:// URL; the API serves over TLS.
TEST_F(LauncherTest, WaitsForAnHttpsRouterAndPrintsItsUrl) {
  absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(dir_.string());
  ASSERT_THAT(certs, IsOk());
  std::ofstream(dir_ / "deploy.yaml")
      << fmt::format(R"(
model: {{name: tiny, path: model}}
router: {{heartbeat_interval_ms: 100, heartbeat_timeout_ms: 2000, health_check_interval_ms: 100,
          https_cert_file: {}, https_key_file: {}, https_ca_file: {}}}
instances:
  - {{name: agg0, role: aggregated, world_size: 1, engine: fake}}
)",
                     certs->cert_file, certs->key_file, certs->ca_file);
  const std::string http = Launch();
  ASSERT_FALSE(http.empty()) << Slurp(launcher_log_);
  EXPECT_THAT(Slurp(launcher_log_), HasSubstr("OpenAI API  https://" + http));
  absl::StatusOr<std::unique_ptr<httplib::Client>> client =
      router::NewRouterHttpClient("https://" + http, certs->ca_file);
  ASSERT_THAT(client, IsOk());
  (*client)->set_read_timeout(20, 0);
  httplib::Result result =
      (*client)->Post("/v1/completions", R"({"model": "tiny", "prompt": "tls", "max_tokens": 3})",
                      "application/json");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  ASSERT_EQ(result->status, 200) << result->body;
  EXPECT_EQ(json::parse(result->body)["choices"][0]["text"],
            router::testing::FakeWorker::ExpectedText("tls", 3));
  // Plain HTTP to it is refused.
  const HostPort endpoint = ParseHostPort(http).value();
  httplib::Client plain(endpoint.host, endpoint.port);
  httplib::Result refused = plain.Get("/health");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
}

// The pid of the child of the launcher whose command line contains `needle`.
pid_t ChildWith(pid_t launcher, const std::string& needle) {
  for (const auto& [pid, cmdline] : ChildrenOf(launcher)) {
    if (cmdline.find(needle) != std::string::npos) return pid;
  }
  return -1;
}

// A field ("state", "address") of `instance` in the router's /health ("" when it
// cannot be read).
std::string InstanceField(const std::string& http, const std::string& instance,
                          const std::string& field) {
  const HostPort endpoint = ParseHostPort(http).value();
  httplib::Client client(endpoint.host, endpoint.port);
  client.set_read_timeout(5, 0);
  httplib::Result result = client.Get("/health");
  if (!result || result->status != 200) return "";
  const json health = json::parse(result->body, nullptr, false);
  if (!health.is_object()) return "";
  for (const json& entry : health.value("instances", json::array())) {
    if (entry.value("name", "") == instance) return entry.value(field, "");
  }
  return "";
}

std::string InstanceState(const std::string& http, const std::string& instance) {
  return InstanceField(http, instance, "state");
}

TEST_F(LauncherTest, ADeadRankTakesItsInstanceDownAndTheRouterStaysUp) {
  const std::string http = Launch();
  ASSERT_FALSE(http.empty()) << Slurp(launcher_log_);
  const pid_t router = ChildWith(launcher_pid_, " router ");
  const pid_t rank0 = ChildWith(launcher_pid_, "--rank 0 ");
  const pid_t rank1 = ChildWith(launcher_pid_, "--rank 1 ");
  ASSERT_GT(router, 0);
  ASSERT_GT(rank0, 0);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  // Its peer is stopped; the router is not, and stops routing to the instance.
  EXPECT_TRUE(AwaitGone(rank0, kDeadline));
  EXPECT_TRUE(
      PollUntil([&] { return InstanceState(http, "agg0") == "unhealthy"; }, kDeadline, kPoll));
  EXPECT_EQ(ChildWith(launcher_pid_, " router "), router);
  // The launcher says the instance is down once it has reaped the ranks it stopped,
  // which may be after rank 0 is seen gone: wait for the line (the others come before).
  EXPECT_TRUE(PollUntil(
      [&] { return Slurp(launcher_log_).find("instance agg0 is down") != std::string::npos; },
      kDeadline, kPoll))
      << Slurp(launcher_log_);
  const std::string log = Slurp(launcher_log_);
  EXPECT_THAT(log, HasSubstr(fmt::format("agg0/rank1 (pid {}) was killed by signal 9", rank1)));
  EXPECT_THAT(log, HasSubstr("agg0.rank1.log"));
  EXPECT_THAT(log, HasSubstr("instance agg0 lost a rank: stopping its other ranks"));

  ASSERT_EQ(kill(launcher_pid_, SIGTERM), 0);
  ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
  ASSERT_EQ(done.exited.size(), 1u);
  EXPECT_EQ(done.exited[0].exit_code, 0) << Slurp(launcher_log_);
  EXPECT_TRUE(AwaitGone(router, kDeadline));
}

TEST_F(LauncherTest, RestartsAnInstanceThatLostARank) {
  const std::string http = Launch({"--restart-instances"});
  ASSERT_FALSE(http.empty()) << Slurp(launcher_log_);
  const pid_t rank1 = ChildWith(launcher_pid_, "--rank 1 ");
  ASSERT_GT(rank1, 0);
  const std::string old_leader = InstanceField(http, "agg0", "address");
  ASSERT_FALSE(old_leader.empty());
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  // The new leader listens on a port of its own (port 0) and registers it.
  ASSERT_TRUE(PollUntil(
      [&] {
        const pid_t again = ChildWith(launcher_pid_, "--rank 1 ");
        return again > 0 && again != rank1 && InstanceState(http, "agg0") == "healthy" &&
               InstanceField(http, "agg0", "address") != old_leader;
      },
      kDeadline, kPoll))
      << Slurp(launcher_log_);
  EXPECT_THAT(Slurp(launcher_log_), HasSubstr("restarting instance agg0 (restart 1 of 3)"));
  const HostPort endpoint = ParseHostPort(http).value();
  httplib::Client client(endpoint.host, endpoint.port);
  client.set_read_timeout(20, 0);
  httplib::Result result =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": "again", "max_tokens": 3})",
                  "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;
}

// The router dies (a crash: signal 11): the launcher starts it again on the addresses
// it had, the instance registers again and serves; the ranks were never stopped.
TEST_F(LauncherTest, ADeadRouterIsRestartedAndTheInstancesRegisterAgain) {
  const std::string http = Launch();
  ASSERT_FALSE(http.empty()) << Slurp(launcher_log_);
  const pid_t router = ChildWith(launcher_pid_, " router ");
  const pid_t rank0 = ChildWith(launcher_pid_, "--rank 0 ");
  ASSERT_GT(router, 0);
  ASSERT_EQ(kill(router, SIGSEGV), 0);
  ASSERT_TRUE(AwaitGone(router, kDeadline));
  ASSERT_TRUE(PollUntil(
      [&] {
        const pid_t again = ChildWith(launcher_pid_, " router ");
        return again > 0 && again != router && InstanceState(http, "agg0") == "healthy";
      },
      kDeadline, kPoll))
      << Slurp(launcher_log_);
  const std::string log = Slurp(launcher_log_);
  EXPECT_THAT(log, HasSubstr(fmt::format("router (pid {}) was killed by signal 11", router)));
  EXPECT_THAT(log, HasSubstr("restarting the router on http " + http));
  EXPECT_THAT(log, HasSubstr("(restart 1 of 3)"));
  EXPECT_EQ(ChildWith(launcher_pid_, "--rank 0 "), rank0);
  const HostPort endpoint = ParseHostPort(http).value();
  httplib::Client client(endpoint.host, endpoint.port);
  client.set_read_timeout(20, 0);
  httplib::Result result =
      client.Post("/v1/completions", R"({"model": "tiny", "prompt": "back", "max_tokens": 3})",
                  "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200) << result->body;

  ASSERT_EQ(kill(launcher_pid_, SIGTERM), 0);
  ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
  ASSERT_EQ(done.exited.size(), 1u);
  EXPECT_EQ(done.exited[0].exit_code, 0) << Slurp(launcher_log_);
}

// Past its restarts, a dead router stops everything.
TEST_F(LauncherTest, ARouterDeadPastItsRestartsStopsEverything) {
  ASSERT_FALSE(Launch({"--max-restarts", "0"}).empty()) << Slurp(launcher_log_);
  std::map<pid_t, std::string> children = ChildrenOf(launcher_pid_);
  ASSERT_EQ(children.size(), 3u);
  const pid_t router = ChildWith(launcher_pid_, " router ");
  ASSERT_EQ(kill(router, SIGKILL), 0);
  ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
  ASSERT_EQ(done.exited.size(), 1u);
  EXPECT_EQ(done.exited[0].exit_code, 1);
  EXPECT_THAT(Slurp(launcher_log_), HasSubstr("the router ended"));
  for (const auto& [pid, cmdline] : children) EXPECT_TRUE(AwaitGone(pid, kDeadline)) << cmdline;
}

// The state letter of `pid` in /proc ('R', 'S', 'T' stopped, 'Z' zombie...); 0 if none.
char ProcessState(pid_t pid) {
  const std::string stat = Slurp(fmt::format("/proc/{}/stat", pid));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
}

// Both ranks of agg0 die together: the launcher (stopped meanwhile) reaps both exits in
// one wait. The second exit belongs to the instance that is already down, not to the
// instance started again for the first: one restart, and the new ranks stay up.
TEST_F(LauncherTest, RanksThatDieTogetherRestartTheirInstanceOnce) {
  const std::string http = Launch({"--restart-instances"});
  ASSERT_FALSE(http.empty()) << Slurp(launcher_log_);
  const pid_t rank0 = ChildWith(launcher_pid_, "--rank 0 ");
  const pid_t rank1 = ChildWith(launcher_pid_, "--rank 1 ");
  ASSERT_GT(rank0, 0);
  ASSERT_GT(rank1, 0);
  // Stopped for sure before the kills: a launcher only about to stop could still see
  // the first exit alone.
  ASSERT_EQ(kill(launcher_pid_, SIGSTOP), 0);
  const bool stopped =
      PollUntil([&] { return ProcessState(launcher_pid_) == 'T'; }, kDeadline, kPoll);
  ASSERT_EQ(kill(rank0, SIGKILL), 0);
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  // Gone for good: a pidfd is readable once the whole process has exited, which its main
  // thread being a zombie ('Z') does not mean; only then does the launcher's next wait
  // see both exits at once.
  const bool both_dead = AwaitGone(rank0, kDeadline) && AwaitGone(rank1, kDeadline);
  ASSERT_EQ(kill(launcher_pid_, SIGCONT), 0);
  ASSERT_TRUE(stopped);
  ASSERT_TRUE(both_dead);
  ASSERT_TRUE(PollUntil(
      [&] {
        const pid_t new0 = ChildWith(launcher_pid_, "--rank 0 ");
        const pid_t new1 = ChildWith(launcher_pid_, "--rank 1 ");
        return new0 > 0 && new0 != rank0 && new1 > 0 && new1 != rank1 &&
               InstanceState(http, "agg0") == "healthy";
      },
      kDeadline, kPoll))
      << Slurp(launcher_log_);
  // The launcher handles a wait's exits before it waits again (and sees SIGTERM): its
  // whole log is written when it exits.
  ASSERT_EQ(kill(launcher_pid_, SIGTERM), 0);
  ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
  ASSERT_EQ(done.exited.size(), 1u);
  EXPECT_EQ(done.exited[0].exit_code, 0);
  const std::string log = Slurp(launcher_log_);
  EXPECT_THAT(log, HasSubstr(fmt::format("agg0/rank0 (pid {}) was killed by signal 9", rank0)));
  EXPECT_THAT(log, HasSubstr(fmt::format("agg0/rank1 (pid {}) was killed by signal 9", rank1)));
  EXPECT_THAT(log, HasSubstr("restarting instance agg0 (restart 1 of 3)"));
  EXPECT_THAT(log, Not(HasSubstr("restart 2 of 3"))) << log;
  EXPECT_THAT(log, Not(HasSubstr("lost a rank"))) << log;
}

// A rank that fails at start: the launcher's message carries the error it logged.
TEST_F(LauncherTest, ARankThatFailsAtStartIsReportedWithItsLastError) {
  std::ofstream(dir_ / "deploy.yaml") << R"(
model: {name: tiny, path: model}
instances:
  - {name: agg0, role: aggregated, world_size: 2, engine: cuda}
)";
  const std::string binary = std::filesystem::absolute("tools/cli/fake_lockstep").string();
  launcher_log_ = (dir_ / "launcher.log").string();
  ASSERT_THAT(supervisor_.Start({"launcher",
                                 {binary, "launch", (dir_ / "deploy.yaml").string(), "--run-dir",
                                  (dir_ / "run").string(), "--lockstep", binary},
                                 launcher_log_}),
              IsOk());
  ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
  ASSERT_EQ(done.exited.size(), 1u);
  EXPECT_EQ(done.exited[0].exit_code, 1);
  const std::string log = Slurp(launcher_log_);
  EXPECT_THAT(log, HasSubstr("a process ended before the deployment was ready"));
  EXPECT_THAT(log, ::testing::ContainsRegex(
                       "agg0/rank[01] \\(pid [0-9]+\\) exited with status 1; last error: engine "
                       "cuda: the fake worker has no CUDA engine; log: "));
}

TEST_F(LauncherTest, AKilledLauncherLeavesNoOrphans) {
  ASSERT_FALSE(Launch().empty()) << Slurp(launcher_log_);
  std::map<pid_t, std::string> children = ChildrenOf(launcher_pid_);
  ASSERT_EQ(children.size(), 3u);
  ASSERT_EQ(kill(launcher_pid_, SIGKILL), 0);
  for (const auto& [pid, cmdline] : children) EXPECT_TRUE(AwaitGone(pid, kDeadline)) << cmdline;
}

}  // namespace
}  // namespace lockstep::launcher

// `lockstep instance` and `lockstep probe` with real processes: a real router, the
// instance command (from the stand-in lockstep binary) and its fake ranks; and the
// cluster token named in the config's `security:` block, used by all of them.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

constexpr absl::Duration kDeadline = absl::Seconds(60);
constexpr absl::Duration kPoll = absl::Milliseconds(50);

class InstanceCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDirWithModel();
    config_ = (dir_ / "deploy.yaml").string();
    std::ofstream(config_) << ConfigText(Security());
    binary_ = std::filesystem::absolute("tools/cli/fake_lockstep").string();
    const std::string address_file = (dir_ / "router.json").string();
    ASSERT_THAT(
        supervisor_.Start({"router",
                           {binary_, "router", "--config", config_, "--address-file", address_file},
                           (dir_ / "router.log").string()}),
        IsOk());
    ASSERT_THAT(supervisor_.WaitReady([&] { return !Slurp(address_file).empty(); }, kDeadline),
                IsOk());
    const json address = json::parse(Slurp(address_file), nullptr, false);
    http_ = address.value("http", "");
    grpc_ = address.value("grpc", "");
  }

  // The config's `security:` block (empty: none).
  virtual std::string Security() { return ""; }

  static std::string ConfigText(const std::string& security) {
    return R"(
model: {name: tiny, path: model}
router: {heartbeat_interval_ms: 100, heartbeat_timeout_ms: 2000, health_check_interval_ms: 100}
instances:
  - {name: agg0, role: aggregated, world_size: 3, engine: fake}
)" + security;
  }

  // Runs `argv` to its end; its exit.
  ChildExit Run(const std::string& name, std::vector<std::string> argv) {
    EXPECT_THAT(supervisor_.Start({name, std::move(argv), (dir_ / (name + ".log")).string()}),
                IsOk());
    return AwaitExit(name);
  }

  // Starts `lockstep instance` for agg0; waits until the router reports it healthy.
  pid_t StartInstance() {
    instance_log_ = (dir_ / "instance.log").string();
    EXPECT_THAT(supervisor_.Start({"instance",
                                   {binary_, "instance", "--config", config_, "--instance", "agg0",
                                    "--rendezvous", grpc_, "--lockstep", binary_, "--leader-listen",
                                    "127.0.0.1:0", "--grace-s", "5"},
                                   instance_log_}),
                IsOk());
    EXPECT_TRUE(PollUntil([&] { return InstanceField("state") == "healthy"; }, kDeadline, kPoll))
        << Slurp(instance_log_);
    return supervisor_.PidOf("instance");
  }

  std::string InstanceField(const std::string& field) {
    const HostPort endpoint = ParseHostPort(http_).value();
    httplib::Client client(endpoint.host, endpoint.port);
    client.set_read_timeout(5, 0);
    httplib::Result result = client.Get("/health");
    if (!result || result->status != 200) return "";
    const json health = json::parse(result->body, nullptr, false);
    if (!health.is_object()) return "";
    for (const json& entry : health.value("instances", json::array())) {
      if (entry.value("name", "") == "agg0") return entry.value(field, "");
    }
    return "";
  }

  // Runs `lockstep probe ADDRESS` to its end (`env`: VAR=VALUE settings for it); its
  // exit status.
  int Probe(const std::string& address, const std::vector<std::string>& env = {}) {
    const std::string name = fmt::format("probe{}", probes_++);
    std::vector<std::string> argv = {"/usr/bin/env"};
    argv.insert(argv.end(), env.begin(), env.end());
    argv.insert(argv.end(), {binary_, "probe", address, "--timeout-ms", "2000"});
    EXPECT_THAT(supervisor_.Start({name, argv, (dir_ / (name + ".log")).string()}), IsOk());
    ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
    EXPECT_EQ(done.exited.size(), 1u);
    return done.exited.empty() ? -1 : done.exited[0].exit_code;
  }

  // Waits for the one child named `name` to exit; its exit.
  ChildExit AwaitExit(const std::string& name) {
    ProcessSupervisor::WaitResult done = supervisor_.Wait(kDeadline);
    EXPECT_EQ(done.exited.size(), 1u);
    if (done.exited.empty()) return {};
    EXPECT_EQ(done.exited[0].name, name);
    return done.exited[0];
  }

  std::filesystem::path dir_;
  std::string config_, binary_, http_, grpc_, instance_log_;
  ProcessSupervisor supervisor_;
  int probes_ = 0;
};

TEST_F(InstanceCommandTest, RunsEveryRankAndTheProbeSeesTheLeader) {
  const pid_t instance = StartInstance();
  std::map<pid_t, std::string> ranks = ChildrenOf(instance);
  ASSERT_EQ(ranks.size(), 3u) << Slurp(instance_log_);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(std::count_if(ranks.begin(), ranks.end(),
                            [&](const auto& r) {
                              return r.second.find(fmt::format(
                                         "worker --config {} --instance agg0 --rank {} --device "
                                         "{} --world-size 3",
                                         config_, rank, rank)) != std::string::npos;
                            }),
              1)
        << rank;
  }
  const std::string leader = InstanceField("address");
  ASSERT_FALSE(leader.empty());
  EXPECT_EQ(Probe(leader), 0);

  ASSERT_EQ(kill(instance, SIGTERM), 0);
  const ChildExit exit = AwaitExit("instance");
  EXPECT_TRUE(exit.clean()) << exit.Describe() << "\n" << Slurp(instance_log_);
  for (const auto& [pid, cmdline] : ranks) {
    EXPECT_TRUE(PollUntil([pid = pid] { return kill(pid, 0) != 0; }, kDeadline, kPoll)) << cmdline;
  }
  // Nothing answers there any more.
  EXPECT_EQ(Probe(leader), 1);
}

TEST_F(InstanceCommandTest, ADeadRankEndsTheInstanceWithAFailure) {
  const pid_t instance = StartInstance();
  std::map<pid_t, std::string> ranks = ChildrenOf(instance);
  ASSERT_EQ(ranks.size(), 3u) << Slurp(instance_log_);
  pid_t victim = -1;
  for (const auto& [pid, cmdline] : ranks) {
    if (cmdline.find("--rank 2 ") != std::string::npos) victim = pid;
  }
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const ChildExit exit = AwaitExit("instance");
  EXPECT_EQ(exit.exit_code, 1) << exit.Describe() << "\n" << Slurp(instance_log_);
  for (const auto& [pid, cmdline] : ranks) {
    EXPECT_TRUE(PollUntil([pid = pid] { return kill(pid, 0) != 0; }, kDeadline, kPoll)) << cmdline;
  }
  EXPECT_THAT(Slurp(instance_log_),
              HasSubstr(fmt::format("agg0/rank2 (pid {}) was killed by signal 9", victim)));
}

TEST_F(InstanceCommandTest, ProbeFailsWithoutALeaderAndOnUsage) {
  EXPECT_EQ(Probe("127.0.0.1:1"), 1);
  EXPECT_EQ(Probe(""), 2);
}

// The router and the ranks take the cluster token from the config (a path relative to
// it; no LOCKSTEP_CLUSTER_TOKEN_FILE anywhere): the ranks register and serve, and a
// caller without the token is refused.
class InstanceCommandTokenTest : public InstanceCommandTest {
 protected:
  std::string Security() override {
    std::ofstream(dir_ / "cluster_token") << "config-named-token\n";
    return "security: {cluster_token_file: cluster_token}\n";
  }
};

TEST_F(InstanceCommandTokenTest, EveryDaemonUsesTheTokenNamedInTheConfig) {
  ASSERT_EQ(std::getenv("LOCKSTEP_CLUSTER_TOKEN_FILE"), nullptr);
  const pid_t instance = StartInstance();
  ASSERT_GT(instance, 0);
  EXPECT_THAT(Slurp((dir_ / "router.log").string()),
              HasSubstr("cluster token from security.cluster_token_file"));
  const std::string leader = InstanceField("address");
  ASSERT_FALSE(leader.empty());
  // The leader wants the token: the probe has it only through the variable.
  EXPECT_EQ(Probe(leader), 1);
  EXPECT_THAT(Slurp((dir_ / "probe0.log").string()), HasSubstr("no cluster token"));
  EXPECT_EQ(Probe(leader, {"LOCKSTEP_CLUSTER_TOKEN_FILE=" + (dir_ / "cluster_token").string()}), 0);
}

TEST_F(InstanceCommandTokenTest, AnUnreadableTokenFileStopsEachDaemonNamingTheField) {
  const std::string bad = (dir_ / "bad.yaml").string();
  std::ofstream(bad) << ConfigText("security: {cluster_token_file: missing_token}\n");
  const std::string missing = (dir_ / "missing_token").string();
  for (const auto& [name, argv] :
       {std::pair{"bad-router", std::vector<std::string>{binary_, "router", "--config", bad}},
        std::pair{"bad-instance",
                  std::vector<std::string>{binary_, "instance", "--config", bad, "--instance",
                                           "agg0", "--rendezvous", grpc_}}}) {
    SCOPED_TRACE(name);
    const ChildExit exit = Run(name, argv);
    EXPECT_EQ(exit.exit_code, 2) << exit.Describe();
    const std::string log = Slurp((dir_ / (std::string(name) + ".log")).string());
    EXPECT_THAT(log, HasSubstr("security.cluster_token_file: cannot read secret file " + missing))
        << log;
  }
}

}  // namespace
}  // namespace lockstep::launcher

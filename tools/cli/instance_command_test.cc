// `lockstep instance` and `lockstep probe` with real processes: a real router, the
// instance command (from the stand-in lockstep binary) and its fake ranks.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/host_port.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/process_supervisor.h"

namespace lockstep::launcher {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = absl::Seconds(60);
constexpr absl::Duration kPoll = absl::Milliseconds(50);

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Pids whose parent is `parent`, with their command lines.
std::map<pid_t, std::string> ChildrenOf(pid_t parent) {
  std::map<pid_t, std::string> children;
  DIR* proc = opendir("/proc");
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    const std::string stat = Slurp(fmt::format("/proc/{}/stat", pid));
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::string cmdline = Slurp(fmt::format("/proc/{}/cmdline", pid));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    children[pid] = cmdline;
  }
  closedir(proc);
  return children;
}

class InstanceCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "model");
    std::ofstream(dir_ / "model" / "lockstep_tokenizer.json")
        << R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257})";
    config_ = (dir_ / "deploy.yaml").string();
    std::ofstream(config_) << R"(
model: {name: tiny, path: model}
router: {heartbeat_interval_ms: 100, heartbeat_timeout_ms: 2000, health_check_interval_ms: 100}
instances:
  - {name: agg0, role: aggregated, world_size: 3, engine: fake}
)";
    binary_ = std::filesystem::absolute("tools/cli/fake_lockstep").string();
    const std::string address_file = (dir_ / "router.json").string();
    ASSERT_THAT(supervisor_.Start({"router",
                                   {binary_, "router", "--config", config_, "--address-file",
                                    address_file},
                                   (dir_ / "router.log").string()}),
                IsOk());
    ASSERT_THAT(supervisor_.WaitReady(
                    [&] { return !Slurp(address_file).empty(); }, kDeadline),
                IsOk());
    const json address = json::parse(Slurp(address_file), nullptr, false);
    http_ = address.value("http", "");
    grpc_ = address.value("grpc", "");
  }

  // Starts `lockstep instance` for agg0; waits until the router reports it healthy.
  pid_t StartInstance() {
    instance_log_ = (dir_ / "instance.log").string();
    EXPECT_THAT(supervisor_.Start({"instance",
                                   {binary_, "instance", "--config", config_, "--instance",
                                    "agg0", "--rendezvous", grpc_, "--lockstep", binary_,
                                    "--leader-listen", "127.0.0.1:0", "--grace-s", "5"},
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

  // Runs `lockstep probe ADDRESS` to its end; its exit status.
  int Probe(const std::string& address) {
    const std::string name = fmt::format("probe{}", probes_++);
    EXPECT_THAT(supervisor_.Start({name, {binary_, "probe", address, "--timeout-ms", "2000"},
                                   (dir_ / (name + ".log")).string()}),
                IsOk());
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
    EXPECT_TRUE(PollUntil([pid = pid] { return kill(pid, 0) != 0; }, kDeadline, kPoll))
        << cmdline;
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
    EXPECT_TRUE(PollUntil([pid = pid] { return kill(pid, 0) != 0; }, kDeadline, kPoll))
        << cmdline;
  }
  EXPECT_THAT(Slurp(instance_log_),
              HasSubstr(fmt::format("agg0/rank2 (pid {}) was killed by signal 9", victim)));
}

TEST_F(InstanceCommandTest, ProbeFailsWithoutALeaderAndOnUsage) {
  EXPECT_EQ(Probe("127.0.0.1:1"), 1);
  EXPECT_EQ(Probe(""), 2);
}

}  // namespace
}  // namespace lockstep::launcher

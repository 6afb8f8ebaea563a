// GPU check, the acceptance of `engine: cuda` end to end: `lockstep launch` of the
// 1-rank aggregated deployment deploy/local/agg_cuda_tiny.yaml (its model made here by
// `lockstep make-model --preset tiny`; only the model path is replaced) starts the
// router and the worker as processes; 20 OpenAI requests from 4 clients at once
// (/v1/completions and /v1/chat/completions, each streaming and not, greedy, ignore_eos)
// all return 200 and end by length with their max_tokens tokens; the worker's log shows
// the CUDA engine and its graphs; SIGTERM stops the launcher and everything with it.
//
// The lockstep binary and the example come from the runfiles under `bazel test`, or
// from the GPU pack (tools/gpu/pack.sh puts them in .gpu/bin and .gpu/data, beside this
// binary). The example is looked for with or without a GPU; the serving skips without
// one (runtime/cuda/gpu_test_env.h). Its waits share the check's own limit
// (cuda_launch_waits.h), so a slow start fails with the launcher's log inside it.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/launcher/process_supervisor.h"
#include "tests/e2e/cuda_launch_waits.h"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;

constexpr int kRequests = 20;
constexpr int kClients = 4;
constexpr char kExample[] = "deploy/local/agg_cuda_tiny.yaml";
constexpr char kExampleModelPath[] = "path: ../../models/tiny";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The directory of this executable.
std::string SelfDir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

// `runfile` (a workspace path) under the test's runfiles, else `packed` beside this
// binary in the GPU pack; "" when neither exists.
std::string Find(const std::string& runfile, const std::string& packed) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir != nullptr) {
    const std::string path =
        absl::StrCat(srcdir, "/", workspace != nullptr ? workspace : "lockstep", "/", runfile);
    if (std::filesystem::exists(path)) return path;
  }
  const std::string path = absl::StrCat(SelfDir(), "/", packed);
  return std::filesystem::exists(path) ? path : "";
}

struct Outcome {
  bool ok = false;
  std::string problem;
};

// Request i: completions or chat, streaming or not, 6..10 tokens; its reply must come
// before `deadline`.
Outcome Request(httplib::Client& client, int i, absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return {false, "not sent: the requests' time ran out"};
  const std::chrono::microseconds left_us(absl::ToInt64Microseconds(left));
  client.set_connection_timeout(left_us);
  client.set_read_timeout(left_us);
  const bool chat = i % 2 == 1;
  const bool stream = i % 4 >= 2;
  const int max_tokens = 6 + i % 5;
  json body = {{"model", "tiny"},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", stream}};
  const std::string text = absl::StrCat("request ", i, ": the quick brown fox");
  if (chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
  } else {
    body["prompt"] = text;
  }
  httplib::Result result = client.Post(chat ? "/v1/chat/completions" : "/v1/completions",
                                       body.dump(), "application/json");
  if (!result) return {false, absl::StrCat("no response: ", httplib::to_string(result.error()))};
  if (result->status != 200) {
    return {false, absl::StrCat("HTTP ", result->status, ": ", result->body)};
  }
  if (stream) {
    const SseCompletion sse = ParseSseCompletion(result->body);
    if (!sse.error.is_null()) return {false, absl::StrCat("stream error: ", sse.error.dump())};
    if (!sse.done) return {false, "the stream did not end with [DONE]"};
    if (sse.finish_reason.count(0) == 0 || sse.finish_reason.at(0) != "length") {
      return {false, absl::StrCat("finish_reason is not length: ", result->body)};
    }
    return {true, ""};
  }
  const json reply = json::parse(result->body, nullptr, false);
  if (!reply.is_object() || !reply.contains("choices") || !reply.at("choices").is_array() ||
      reply.at("choices").empty() || !reply.at("choices").at(0).is_object() ||
      !reply.contains("usage") || !reply.at("usage").is_object()) {
    return {false, absl::StrCat("not a completion: ", result->body)};
  }
  const json& choice = reply.at("choices").at(0);
  const json& usage = reply.at("usage");
  const bool by_length = choice.contains("finish_reason") &&
                         choice.at("finish_reason").is_string() &&
                         choice.at("finish_reason").get<std::string>() == "length";
  const bool all_tokens = usage.contains("completion_tokens") &&
                          usage.at("completion_tokens").is_number_integer() &&
                          usage.at("completion_tokens").get<int>() == max_tokens;
  if (!by_length || !all_tokens) {
    return {false, absl::StrCat("not ", max_tokens, " tokens ending by length: ", result->body)};
  }
  return {true, ""};
}

TEST(CudaLaunchTest, ServesTwentyOpenAiRequests) {
  const std::string example = Find(kExample, "../data/agg_cuda_tiny.yaml");
  ASSERT_FALSE(example.empty()) << "no " << kExample << " in the runfiles or the pack";
  const std::string example_text = Slurp(example);
  ASSERT_NE(example_text.find(kExampleModelPath), std::string::npos)
      << example << " no longer names its model as '" << kExampleModelPath << "'";
  // (//runtime/config:config_yaml_test parses and validates the example.)
  ASSERT_NE(example_text.find("engine: cuda"), std::string::npos) << example_text;
  LOCKSTEP_SKIP_WITHOUT_GPU();

  const std::string binary = Find("tools/lockstep", "lockstep");
  ASSERT_FALSE(binary.empty()) << "no lockstep binary in the runfiles or beside this one";
  const std::string dir = TestTmpDir() + "/cuda_launch";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  launcher::ProcessSupervisor supervisor;
  const absl::Time start = absl::Now();
  const LaunchWaits waits = SplitLimit(CheckLimit(absl::Seconds(150)));
  std::cout << "waits: make-model " << waits.make_model << ", ready " << waits.ready
            << " (launcher " << waits.launcher_ready_timeout_s << " s), requests " << waits.requests
            << ", stop " << waits.stop << "\n";
  // The model, by the CLI.
  const std::string model = dir + "/models/tiny";
  ASSERT_TRUE(supervisor
                  .Start({"make-model",
                          {binary, "make-model", "--preset", "tiny", "--out", model},
                          dir + "/make_model.log"})
                  .ok());
  launcher::ProcessSupervisor::WaitResult made = supervisor.Wait(waits.make_model);
  ASSERT_EQ(made.exited.size(), 1u) << "make-model did not finish in " << waits.make_model << "\n"
                                    << Slurp(dir + "/make_model.log");
  ASSERT_TRUE(made.exited[0].clean()) << Slurp(dir + "/make_model.log");
  const std::string deployment = dir + "/deploy.yaml";
  std::ofstream(deployment) << absl::StrReplaceAll(example_text,
                                                   {{kExampleModelPath, "path: " + model}});

  const std::string run_dir = dir + "/run";
  const std::string launcher_log = dir + "/launcher.log";
  ASSERT_TRUE(supervisor
                  .Start({"launcher",
                          {binary, "launch", deployment, "--run-dir", run_dir, "--lockstep", binary,
                           "--ready-timeout-s", absl::StrCat(waits.launcher_ready_timeout_s),
                           "--grace-s", "10"},
                          launcher_log})
                  .ok());
  const std::string endpoints = run_dir + "/endpoints.json";
  const absl::Status ready =
      supervisor.WaitReady([&] { return std::filesystem::exists(endpoints); }, waits.ready);
  ASSERT_TRUE(ready.ok()) << ready << "\n"
                          << Slurp(launcher_log) << Slurp(run_dir + "/gpu0.rank0.log");
  std::cout << "ready in " << absl::FormatDuration(absl::Now() - start) << "\n";
  const std::string http = json::parse(Slurp(endpoints), nullptr, false).value("http", "");
  ASSERT_FALSE(http.empty()) << "endpoints.json: " << Slurp(endpoints);

  absl::Mutex mu;
  std::vector<std::string> problems;
  int served = 0;
  std::vector<std::thread> clients;
  const absl::Time requests_deadline = absl::Now() + waits.requests;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("http://" + http);
      for (int i = c; i < kRequests; i += kClients) {
        const Outcome outcome = Request(client, i, requests_deadline);
        absl::MutexLock lock(&mu);
        if (outcome.ok) {
          ++served;
        } else {
          problems.push_back(absl::StrCat("request ", i, ": ", outcome.problem));
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  std::cout << served << "/" << kRequests << " OpenAI requests served in "
            << absl::FormatDuration(absl::Now() - start) << " from the start\n";
  EXPECT_EQ(served, kRequests) << (problems.empty() ? "" : problems[0]);

  const std::string worker_log = Slurp(run_dir + "/gpu0.rank0.log");
  EXPECT_NE(worker_log.find("engine on device 0 ready"), std::string::npos) << worker_log;
  EXPECT_NE(worker_log.find("decode graphs captured"), std::string::npos) << worker_log;

  ASSERT_EQ(kill(supervisor.PidOf("launcher"), SIGTERM), 0);
  launcher::ProcessSupervisor::WaitResult stopped = supervisor.Wait(waits.stop);
  ASSERT_EQ(stopped.exited.size(), 1u) << "the launcher did not stop in " << waits.stop << "\n"
                                       << Slurp(launcher_log);
  EXPECT_TRUE(stopped.exited[0].clean()) << stopped.exited[0].Describe() << "\n"
                                         << Slurp(launcher_log);
}

}  // namespace
}  // namespace lockstep::e2e

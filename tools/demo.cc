#include "tools/demo.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "runtime/config/config_yaml.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/launcher/local_deployment.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/chat_once.h"
#include "tools/bench/instance_stats.h"
#include "tools/bench/load_generator.h"
#include "tools/cli/flags.h"

namespace lockstep {
namespace {

// Writes a model (with its draft) at `dir` unless one is there: the make-model preset
// the config's model name names (tiny-dsv3, ...), else tiny-moe.
absl::Status EnsureModel(const std::string& dir, const std::string& name) {
  if (std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    return absl::OkStatus();
  }
  const std::string preset = engine::PresetConfig(name).ok() ? name : "tiny-moe";
  std::printf("demo: creating the %s model in %s\n", preset.c_str(), dir.c_str());
  engine::MakeModelOptions options;
  options.preset = preset;
  options.out_dir = dir;
  options.dtype = engine::PresetDefaultDType(preset);
  return engine::MakeModel(options);
}

}  // namespace

int RunDemo(const std::vector<std::string>& args) {
  cli::FlagSet flags("demo");
  std::string config_path = "deploy/local/disagg_ctx_dep2_gen_dep4.yaml";
  bench::LoadOptions load;
  load.requests = 64;
  load.concurrency = 8;
  load.max_output_tokens = 48;
  flags.AddPath("config", &config_path, "the deployment to run");
  flags.AddInt("requests", &load.requests, "requests in the workload");
  flags.AddInt("concurrency", &load.concurrency, "requests in flight at once");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  SetLogLevel(spdlog::level::warn);
  absl::StatusOr<config::DeploymentConfig> config = config::LoadDeploymentConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "demo: %s\n", config.status().ToString().c_str());
    return 1;
  }
  if (absl::Status s = EnsureModel(config->model.path, config->model.name); !s.ok()) {
    std::fprintf(stderr, "demo: %s\n", s.ToString().c_str());
    return 1;
  }
  const std::string run_dir =
      cli::ResolveUserPath(absl::StrCat("runs/demo-", absl::ToUnixSeconds(absl::Now())));
  std::printf("demo: launching %s (logs in %s)\n", config_path.c_str(), run_dir.c_str());
  absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d =
      launcher::LocalDeployment::StartFile(config_path, run_dir, "/proc/self/exe",
                                           absl::Seconds(180));
  if (!d.ok()) {
    std::fprintf(stderr, "demo: %s\n", d.status().ToString().c_str());
    return 1;
  }
  std::printf("demo: router at %s/v1 (OpenAI API), metrics at %s/metrics\n",
              (*d)->http_url().c_str(), (*d)->http_url().c_str());
  for (const config::InstanceConfig& i : config->instances) {
    std::printf("demo: instance %s: %s, DEP%lld\n", i.name.c_str(),
                std::string(config::InstanceRoleName(i.role)).c_str(),
                static_cast<long long>(i.world_size));
  }
  load.http_address = (*d)->http_url();
  load.ca_file = config->router.https_ca_file;
  load.model = config->model.name;
  load.api_key = config->router.api_key;
  load.request_timeout = absl::Seconds(config->router.request_timeout_s);
  const auto before = bench::ReadInstanceCounters((*d)->grpc_address());
  std::printf("demo: sending %lld requests, %lld at a time\n",
              static_cast<long long>(load.requests), static_cast<long long>(load.concurrency));
  const bench::LoadResult result = bench::RunLoad(load);
  const auto after = bench::ReadInstanceCounters((*d)->grpc_address());
  std::vector<bench::InstanceDelta> deltas;
  if (before.ok() && after.ok()) deltas = bench::Subtract(*after, *before);
  const nlohmann::json report = bench::MakeReport(load, result, deltas);
  std::printf("%s", bench::FormatReport(report).c_str());
  // One chat completion: the messages go through the model's chat template in the router.
  bench::ChatOptions chat;
  chat.http_address = load.http_address;
  chat.ca_file = load.ca_file;
  chat.model = load.model;
  chat.api_key = load.api_key;
  chat.system = "You are a helpful assistant.";
  chat.user = "What is disaggregated serving?";
  chat.timeout = load.request_timeout;
  const absl::StatusOr<bench::ChatReply> reply = bench::ChatOnce(chat);
  if (reply.ok()) {
    std::printf("demo: chat completion: %lld prompt tokens after the chat template, "
                "reply (untrained weights) %s\n",
                static_cast<long long>(reply->prompt_tokens),
                nlohmann::json(reply->content).dump(-1, ' ', true,
                                                     nlohmann::json::error_handler_t::replace)
                    .c_str());
  } else {
    std::fprintf(stderr, "demo: %s\n", reply.status().ToString().c_str());
  }
  std::printf("demo: stopping the deployment\n");
  d->reset();
  std::printf("demo: done\n");
  return report["failed"].get<int64_t>() == 0 && reply.ok() ? 0 : 1;
}

}  // namespace lockstep

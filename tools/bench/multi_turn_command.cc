#include "tools/bench/multi_turn_command.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "nlohmann/json.hpp"
#include "runtime/config/config_yaml.h"
#include "runtime/config/deployment_config.h"
#include "runtime/launcher/local_deployment.h"
#include "tools/bench/metrics_text.h"
#include "tools/bench/multi_turn.h"
#include "tools/bench/multi_turn_report.h"
#include "tools/cli/flags.h"
#include "yaml-cpp/yaml.h"

namespace lockstep::bench {
namespace {

// How long the bench waits for the workers' counters to include the run.
constexpr absl::Duration kWorkerCountersDeadline = absl::Seconds(10);

// The tokens_per_block of the instances that serve prompts (aggregated or context).
int32_t PromptTokensPerBlock(const config::DeploymentConfig& config) {
  for (const config::InstanceConfig& instance : config.instances) {
    if (instance.role != config::InstanceRole::kGeneration) {
      return static_cast<int32_t>(instance.kv.tokens_per_block);
    }
  }
  return 16;
}

// Whether prompts are prefilled where they are decoded: the router prefers aggregated
// instances whenever there are any.
bool RepliesPublished(const config::DeploymentConfig& config) {
  for (const config::InstanceConfig& instance : config.instances) {
    if (instance.role == config::InstanceRole::kAggregated) return true;
  }
  return false;
}

// One run of the workload against the router at `http` / `grpc`: its report.
nlohmann::json RunOnce(MultiTurnOptions options, const std::string& policy,
                       const std::string& http) {
  std::map<std::string, double> before, after;
  if (absl::StatusOr<std::string> text = FetchMetrics(http, options.api_key); text.ok()) {
    before = ParseSamples(*text);
  }
  const MultiTurnResult result = RunMultiTurn(options);
  double prompt_tokens = 0;  // of the turns that completed
  for (const TurnOutcome& t : result.turns) {
    if (t.ok) prompt_tokens += static_cast<double>(t.prompt_tokens);
  }
  // The workers' counters reach /metrics with the router's next Stats poll: read until
  // they count every completed turn's prompt (recomputation after a pause counts too).
  const absl::Time deadline = absl::Now() + kWorkerCountersDeadline;
  while (true) {
    absl::StatusOr<std::string> text = FetchMetrics(http, options.api_key);
    if (!text.ok()) {
      std::fprintf(stderr, "bench: %s\n", text.status().ToString().c_str());
      break;
    }
    after = ParseSamples(*text);
    const std::vector<RankReuse> ranks = WorkerReuse(before, after);
    double counted = 0;
    for (const RankReuse& rank : ranks) counted += rank.prompt_tokens;
    if (ranks.empty() || counted >= prompt_tokens) break;
    if (absl::Now() > deadline) {
      std::fprintf(stderr,
                   "bench: after %.0f s the workers' counters show %.0f of the %.0f prompt tokens "
                   "sent; their hit rate is of those\n",
                   absl::ToDoubleSeconds(kWorkerCountersDeadline), counted, prompt_tokens);
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return MakeMultiTurnReport(options, policy, result, before, after);
}

}  // namespace

absl::StatusOr<std::string> ConfigWithPolicy(const std::string& config_path,
                                             const std::string& policy) {
  if (!config::ParseRoutingPolicy(policy).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--policies: unknown routing policy '", policy, "'"));
  }
  absl::StatusOr<config::DeploymentConfig> loaded = config::LoadDeploymentConfig(config_path);
  if (!loaded.ok()) return loaded.status();
  YAML::Node node = YAML::LoadFile(config_path);
  node["router"]["policy"] = policy;
  // The copy lives in another directory: model paths as resolved against this one.
  node["model"]["path"] = loaded->model.path;
  if (!loaded->model.draft_path.empty()) node["model"]["draft_path"] = loaded->model.draft_path;
  YAML::Emitter out;
  out << node;
  return std::string(out.c_str());
}

int RunMultiTurnBench(const std::vector<std::string>& args) {
  cli::FlagSet flags("bench");
  std::string config_path, http, grpc, json_path, run_dir, workload = "multi-turn";
  std::string model = "tiny-moe", policies = "least_load,kv_aware";
  MultiTurnOptions o;
  int64_t ready_timeout_s = 180, request_timeout_s = 0, seed = 1, tokens_per_block = 0;
  int64_t think_ms = 0;
  bool disaggregated = false;
  flags.AddString("workload", &workload, "multi-turn");
  flags.AddPath("config", &config_path, "start this deployment (YAML) once per policy");
  flags.AddString("policies", &policies,
                  "with --config: the router policies to compare, the baseline first");
  flags.AddString("http", &http, "router HTTP address of a running deployment (its metrics)");
  flags.AddString("grpc", &grpc, "router gRPC address of a running deployment (the requests)");
  flags.AddString("model", &model, "model name (with --http)");
  flags.AddInt("tokens-per-block", &tokens_per_block,
               "the instances' kv.tokens_per_block, for the ideal hit rate (with --http)");
  flags.AddBool("disaggregated", &disaggregated,
                "with --http: context instances prefill the prompts, so replies are not reused "
                "(for the ideal hit rate)");
  flags.AddInt("users", &o.users, "conversations");
  flags.AddInt("concurrency", &o.concurrency, "conversations in progress at once");
  flags.AddInt("min-turns", &o.min_turns, "fewest turns of a conversation");
  flags.AddInt("max-turns", &o.max_turns, "most turns of a conversation");
  flags.AddInt("system-prompt", &o.system_tokens, "tokens of the system prompt all users share");
  flags.AddInt("min-user", &o.min_user_tokens, "shortest user message, in tokens");
  flags.AddInt("max-user", &o.max_user_tokens, "longest user message");
  flags.AddInt("min-output", &o.min_output_tokens, "shortest reply, in tokens");
  flags.AddInt("max-output", &o.max_output_tokens, "longest reply");
  flags.AddInt("think-ms", &think_ms,
               "mean pause of a user between a reply and the next message (uniform in 0..2x; "
               "0: at once)");
  flags.AddInt("seed", &seed, "workload seed (the same for every policy)");
  flags.AddPath("json", &json_path, "also write the figures to this JSON file");
  flags.AddPath("run-dir", &run_dir, "logs of the started deployments (default runs/bench-TIME)");
  flags.AddInt("ready-timeout-s", &ready_timeout_s, "wait this long for a deployment");
  flags.AddInt("request-timeout-s", &request_timeout_s,
               "a turn may take this long (0: the config's router.request_timeout_s)");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  if (workload != "multi-turn" || config_path.empty() == (http.empty() || grpc.empty())) {
    std::fprintf(stderr,
                 "bench --workload multi-turn: give --config FILE, or --http and --grpc of a "
                 "running deployment\n");
    return 2;
  }
  if (o.users < 1 || o.concurrency < 1 || o.min_turns < 1 || o.max_turns < o.min_turns ||
      o.system_tokens < 0 || o.min_user_tokens < 1 || o.max_user_tokens < o.min_user_tokens ||
      o.min_output_tokens < 1 || o.max_output_tokens < o.min_output_tokens || think_ms < 0) {
    std::fprintf(stderr,
                 "bench: --users, --concurrency, --min-turns, --min-user and --min-output must be "
                 ">= 1, each --max-* >= its --min-*, --system-prompt and --think-ms >= 0\n");
    return 2;
  }
  o.seed = static_cast<uint64_t>(seed);
  o.mean_think = absl::Milliseconds(think_ms);
  SetLogLevel(spdlog::level::warn);
  nlohmann::json runs = nlohmann::json::array();
  if (config_path.empty()) {  // a running deployment, whatever its policy
    o.grpc_address = grpc;
    o.model = model;
    o.tokens_per_block = static_cast<int32_t>(tokens_per_block > 0 ? tokens_per_block : 16);
    o.replies_published = !disaggregated;
    o.request_timeout = absl::Seconds(request_timeout_s > 0 ? request_timeout_s : 600);
    runs.push_back(RunOnce(o, "as deployed", http));
    std::printf("%s", FormatMultiTurnReport(runs.back()).c_str());
  } else {
    if (run_dir.empty()) {
      run_dir = cli::ResolveUserPath(absl::StrCat("runs/bench-", absl::ToUnixSeconds(absl::Now())));
    }
    for (const std::string& policy :
         std::vector<std::string>(absl::StrSplit(policies, ',', absl::SkipEmpty()))) {
      absl::StatusOr<std::string> yaml = ConfigWithPolicy(config_path, policy);
      if (!yaml.ok()) {
        std::fprintf(stderr, "bench: %s\n", yaml.status().ToString().c_str());
        return 2;
      }
      const std::string dir = absl::StrCat(run_dir, "/", policy);
      std::fprintf(stderr, "bench: starting %s with policy %s (logs in %s)\n", config_path.c_str(),
                   policy.c_str(), dir.c_str());
      absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d =
          launcher::LocalDeployment::Start(*yaml, dir, "/proc/self/exe",
                                           absl::Seconds(ready_timeout_s));
      if (!d.ok()) {
        std::fprintf(stderr, "bench: %s\n", d.status().ToString().c_str());
        return 1;
      }
      const config::DeploymentConfig& c = (*d)->config();
      o.grpc_address = (*d)->grpc_address();
      o.model = c.model.name;
      o.api_key = c.router.api_key;
      o.tokens_per_block = PromptTokensPerBlock(c);
      o.replies_published = RepliesPublished(c);
      o.request_timeout =
          absl::Seconds(request_timeout_s > 0 ? request_timeout_s : c.router.request_timeout_s);
      runs.push_back(RunOnce(o, policy, (*d)->http_address()));
      std::printf("%s", FormatMultiTurnReport(runs.back()).c_str());
    }
  }
  nlohmann::json out = {{"runs", runs}};
  if (runs.size() >= 2) {
    out["comparison"] = CompareMultiTurn(runs[0], runs[runs.size() - 1]);
    std::printf("%s", FormatComparison(out["comparison"]).c_str());
  }
  if (!json_path.empty()) {
    std::ofstream file(json_path);
    file << out.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  for (const nlohmann::json& r : runs) {
    if (r["failed"].get<int64_t>() > 0) return 1;
  }
  return 0;
}

}  // namespace lockstep::bench

#include "tools/bench/bench_command.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "runtime/config/deployment_config.h"
#include "runtime/launcher/local_deployment.h"
#include "spec_decode/speculative_config.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/draft_k_sampler.h"
#include "tools/bench/failure_injection.h"
#include "tools/bench/instance_stats.h"
#include "tools/bench/load_generator.h"
#include "tools/bench/metrics_text.h"
#include "tools/bench/multi_turn_command.h"
#include "tools/bench/request_drafts.h"
#include "tools/cli/flags.h"

namespace lockstep::bench {

int RunBench(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--workload=multi-turn" ||
        (args[i] == "--workload" && i + 1 < args.size() && args[i + 1] == "multi-turn")) {
      return RunMultiTurnBench(args);  // conversations over gRPC, its own flags
    }
  }
  cli::FlagSet flags("bench");
  std::string config_path, http, grpc, json_path, run_dir, model = "tiny-moe";
  LoadOptions load;
  int64_t ready_timeout_s = 180;
  int64_t request_timeout_s = 0;
  flags.AddPath("config", &config_path, "start this deployment (YAML) for the run");
  flags.AddString("http", &http,
                  "router HTTP address of a running deployment (host:port, or "
                  "https://host:port for an HTTPS router)");
  flags.AddPath("ca-file", &load.ca_file,
                "with --http https://...: the CA that signed the router's certificate "
                "(default: the system's trusted CAs)");
  flags.AddString("grpc", &grpc, "router gRPC address of a running deployment (for counters)");
  flags.AddString("model", &model, "model name (with --http)");
  flags.AddInt("requests", &load.requests, "number of requests");
  flags.AddInt("concurrency", &load.concurrency, "requests in flight at once");
  flags.AddInt("min-prompt", &load.min_prompt_bytes, "shortest prompt, in bytes (= tokens)");
  flags.AddInt("max-prompt", &load.max_prompt_bytes, "longest prompt");
  flags.AddInt("min-output", &load.min_output_tokens, "fewest output tokens");
  flags.AddInt("max-output", &load.max_output_tokens, "most output tokens");
  int64_t seed = 1;
  flags.AddInt("seed", &seed, "workload seed");
  std::string workload = "default";
  flags.AddString("workload", &workload,
                  "default (random letters) | repetitive (a short span repeated: text the "
                  "model can copy; 512-1024-byte prompts unless --min-prompt / --max-prompt) | "
                  "multi-turn (conversations; see its own --help)");
  KillPlan kill;
  flags.AddString("kill", &kill.process,
                  "with --config: SIGKILL this process of the deployment (e.g. agg0/rank1) "
                  "once the load streams, and report how long the migrated requests waited "
                  "for their next token");
  flags.AddInt("kill-after-tokens", &kill.after_tokens,
               "with --kill: kill once the clients received this many tokens (0: 4 per "
               "concurrent request)");
  flags.AddPath("json", &json_path, "also write the figures to this JSON file");
  flags.AddPath("run-dir", &run_dir, "logs of a started deployment (default runs/bench-TIME)");
  flags.AddInt("ready-timeout-s", &ready_timeout_s, "wait this long for the deployment");
  flags.AddInt("request-timeout-s", &request_timeout_s,
               "a request may wait this long for its next byte (0: the config's "
               "router.request_timeout_s; with --http, that field's default)");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  if (config_path.empty() == http.empty()) {
    std::fprintf(stderr, "bench: give either --config FILE or --http HOST:PORT\n");
    return 2;
  }
  if (!kill.process.empty() && config_path.empty()) {
    std::fprintf(stderr, "bench: --kill needs --config (a deployment the bench starts)\n");
    return 2;
  }
  if (absl::StatusOr<LoadOptions::Workload> parsed = ParseWorkload(workload); parsed.ok()) {
    load.workload = *parsed;
  } else {
    std::fprintf(stderr, "bench: --workload: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  if (load.workload == LoadOptions::Workload::kRepetitive) {
    if (!flags.WasSet("max-prompt")) load.max_prompt_bytes = kRepetitiveMaxPromptBytes;
    if (!flags.WasSet("min-prompt")) {
      load.min_prompt_bytes = std::min(kRepetitiveMinPromptBytes, load.max_prompt_bytes);
    }
  }
  if (load.requests < 1 || load.concurrency < 1 || request_timeout_s < 0) {
    std::fprintf(stderr,
                 "bench: --requests and --concurrency must be >= 1, --request-timeout-s >= 0\n");
    return 2;
  }
  // The client waits as long as the router lets a request run, so a request queued
  // behind others under load is not failed by the client first.
  int64_t router_timeout_s = config::RouterConfig().request_timeout_s;
  SetLogLevel(spdlog::level::warn);
  std::unique_ptr<launcher::LocalDeployment> deployment;
  if (!config_path.empty()) {
    if (run_dir.empty()) {
      run_dir = cli::ResolveUserPath(absl::StrCat("runs/bench-", absl::ToUnixSeconds(absl::Now())));
    }
    std::fprintf(stderr, "bench: starting %s (logs in %s)\n", config_path.c_str(), run_dir.c_str());
    absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> started =
        launcher::LocalDeployment::StartFile(config_path, run_dir, "/proc/self/exe",
                                             absl::Seconds(ready_timeout_s));
    if (!started.ok()) {
      std::fprintf(stderr, "bench: %s\n", started.status().ToString().c_str());
      return 1;
    }
    deployment = *std::move(started);
    http = deployment->http_url();
    load.ca_file = deployment->config().router.https_ca_file;
    grpc = deployment->grpc_address();
    model = deployment->config().model.name;
    load.api_key = deployment->config().router.api_key;
    router_timeout_s = deployment->config().router.request_timeout_s;
  }
  load.request_timeout =
      absl::Seconds(request_timeout_s > 0 ? request_timeout_s : router_timeout_s);
  load.seed = static_cast<uint64_t>(seed);
  load.http_address = http;
  load.model = model;
  std::map<std::string, InstanceDelta> before;
  if (!grpc.empty()) before = ReadInstanceCounters(grpc).value_or(before);
  const absl::StatusOr<std::map<std::string, RequestDrafts>> requests_before =
      ReadRequestDrafts(http, load.api_key, load.ca_file);
  std::atomic<int64_t> tokens{0};
  std::unique_ptr<FailureInjector> injector;
  if (!kill.process.empty()) {
    if (kill.after_tokens <= 0) kill.after_tokens = 4 * load.concurrency;
    load.record_token_times = true;
    load.tokens_received = &tokens;
    injector =
        std::make_unique<FailureInjector>(*deployment, kill, tokens, load.request_timeout);
  }
  // Requests by their current K is a gauge: sampled while the load runs.
  std::unique_ptr<DraftKSampler> k_sampler;
  if (!grpc.empty()) k_sampler = std::make_unique<DraftKSampler>(grpc, absl::Milliseconds(250));
  const LoadResult result = RunLoad(load);
  std::optional<DraftKAverages> k_requests;
  if (k_sampler != nullptr) k_requests = k_sampler->Stop();
  std::optional<nlohmann::json> failure;
  if (injector != nullptr) {
    const absl::StatusOr<absl::Time> killed_at = injector->Finish();
    if (!killed_at.ok()) {
      std::fprintf(stderr, "bench: %s\n", std::string(killed_at.status().message()).c_str());
      return 1;
    }
    const absl::StatusOr<std::string> metrics = FetchMetrics(http, load.api_key, load.ca_file);
    failure = FailureReport(kill, *killed_at, result,
                            MigrationsInLog(deployment->LogOf("router")),
                            metrics.ok() ? *metrics : "");
  }
  std::map<std::string, RequestDrafts> request_drafts;
  if (requests_before.ok()) {
    absl::StatusOr<std::map<std::string, RequestDrafts>> after =
        ReadRequestDrafts(http, load.api_key, load.ca_file);
    if (after.ok()) request_drafts = RequestDraftsSince(*after, *requests_before);
  }
  std::vector<InstanceDelta> deltas;
  if (!grpc.empty()) {
    absl::StatusOr<std::map<std::string, InstanceDelta>> after = ReadInstanceCounters(grpc);
    if (after.ok()) deltas = Subtract(*after, before);
  }
  if (k_requests.has_value()) k_requests->Fill(&deltas);
  if (deployment != nullptr) {
    for (InstanceDelta& d : deltas) {
      if (const config::InstanceConfig* instance = deployment->config().FindInstance(d.name)) {
        const spec::SpeculativeConfig s = config::EffectiveSpeculative(*instance);
        d.speculative = s.enabled() ? absl::StrCat(spec::MethodName(s.method), " K=",
                                                   s.num_draft_tokens, s.dynamic ? " dynamic" : "")
                                    : "none";
      }
    }
  }
  nlohmann::json report = MakeReport(load, result, deltas, request_drafts);
  std::printf("%s", FormatReport(report).c_str());
  if (failure.has_value()) {
    std::printf("%s", FormatFailureReport(*failure).c_str());
    report["failure"] = *std::move(failure);
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return report["failed"].get<int64_t>() == 0 ? 0 : 1;
}

}  // namespace lockstep::bench

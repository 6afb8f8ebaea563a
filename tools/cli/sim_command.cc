#include "tools/cli/sim_command.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "runtime/sim/scenarios.h"
#include "tools/cli/flags.h"

namespace lockstep::cli {

int RunSimCommand(const std::vector<std::string>& args) {
  FlagSet flags("sim");
  std::string scenario = "dep4-small-batch";
  int max_batch_size = 2;
  std::string policy_name = "reserved";
  int64_t seed = 1;
  int64_t seeds = 1;
  int64_t requests = 0;
  bool random_config = false;
  bool verbose = false;
  bool fleet = false;
  flags.AddString("scenario", &scenario, "named scenario (dep4-small-batch)");
  flags.AddInt("max-batch-size", &max_batch_size, "per-rank max_batch_size of the scenario");
  flags.AddString("dummy-policy", &policy_name, "compat or reserved");
  flags.AddInt("seed", &seed, "seed (the first seed with --seeds)");
  flags.AddInt("seeds", &seeds, "number of seeds to run");
  flags.AddInt("requests", &requests, "override the number of requests (0: scenario's)");
  flags.AddBool("random-config", &random_config, "a random configuration per seed");
  flags.AddBool("fleet", &fleet,
                "a random fleet per seed: 2-4 aggregated instances, some failing mid-run, "
                "their requests migrating");
  flags.AddBool("verbose", &verbose, "print every run's configuration and summary");
  if (std::optional<int> exit_code = flags.ParseCommandLine(args)) return *exit_code;
  sched::DummyPolicy policy;
  if (policy_name == "compat") {
    policy = sched::DummyPolicy::kCompat;
  } else if (policy_name == "reserved") {
    policy = sched::DummyPolicy::kReserved;
  } else {
    std::fprintf(stderr, "sim: --dummy-policy must be compat or reserved, got '%s'\n",
                 policy_name.c_str());
    return 2;
  }
  // Per-run drain notices would drown the summaries.
  SetLogLevel(verbose ? spdlog::level::info : spdlog::level::err);
  int64_t passed = 0, failed = 0;
  double vetoes_per_1000 = 0, tokens_per_step = 0;
  int64_t context_tokens = 0, reused_tokens = 0;
  for (int64_t i = 0; i < seeds; ++i) {
    const uint64_t s = static_cast<uint64_t>(seed + i);
    if (fleet) {
      sim::FleetConfig config = sim::RandomFleetConfig(s);
      if (requests > 0) config.sim.workload.num_requests = requests;
      const sim::FleetSummary summary = sim::RunFleet(config);
      summary.ok() ? ++passed : ++failed;
      if (!summary.ok() || verbose || seeds == 1) {
        std::printf("%s %s\n  %s\n", summary.ok() ? "PASS" : "FAIL", config.ToString().c_str(),
                    summary.ToString().c_str());
      }
      continue;
    }
    sim::SimConfig config;
    if (random_config) {
      config = sim::RandomConfig(s);
    } else {
      absl::StatusOr<sim::SimConfig> named =
          sim::ScenarioByName(scenario, max_batch_size, policy, s);
      if (!named.ok()) {
        std::fprintf(stderr, "sim: %s\n", std::string(named.status().message()).c_str());
        return 2;
      }
      config = *named;
    }
    if (requests > 0) config.workload.num_requests = requests;
    const sim::SimSummary summary = sim::RunSimulation(config);
    const bool ok = summary.ok() && (random_config || summary.failed == 0);
    ok ? ++passed : ++failed;
    vetoes_per_1000 += summary.vetoes_per_1000_steps;
    tokens_per_step += summary.tokens_per_step;
    context_tokens += summary.context_tokens;
    reused_tokens += summary.reused_tokens;
    if (!ok || verbose || seeds == 1) {
      std::printf("%s %s\n  %s\n", ok ? "PASS" : "FAIL", config.ToString().c_str(),
                  summary.ToString().c_str());
    }
  }
  if (seeds > 1 && !fleet) {
    std::printf(
        "mean over %lld seeds: %.1f vetoed steps per 1000, %.2f generated tokens per step; "
        "prefix reuse: %lld of %lld prefill tokens\n",
        static_cast<long long>(seeds), vetoes_per_1000 / static_cast<double>(seeds),
        tokens_per_step / static_cast<double>(seeds), static_cast<long long>(reused_tokens),
        static_cast<long long>(context_tokens));
  }
  std::printf("%lld passed, %lld failed\n", static_cast<long long>(passed),
              static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}

}  // namespace lockstep::cli

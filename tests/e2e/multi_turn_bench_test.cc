// End to end, `lockstep bench --workload multi-turn` under kv_aware: the bench starts the
// deployment (router and CPU-engine workers as real processes) and runs conversations
// one at a time, so every turn finds its conversation where the previous turn left it.
// Then the workers' own count of reused prompt tokens must equal the bench's ideal
// exactly: in aggregated serving the previous turn's prompt and reply up to history − 1
// (what decoding publishes), in disaggregated serving its prompt only (what the context
// instance prefilled). An ideal that counted a token too many or too few per turn fails.
// The responses' cached_prompt_tokens (OpenAI's usage cached_tokens) add up to the same.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/e2e_util.h"

namespace lockstep::e2e {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string AggregatedYaml(const std::string& model_dir) {
  return absl::StrCat(R"(model:
  name: tiny-moe
  path: )",
                      model_dir, R"(
router:
  policy: least_load
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 2000
  health_check_interval_ms: 200
instances:
  - name: agg0
    role: aggregated
    world_size: 2
    engine: cpu
    executor: {max_batch_size: 4, max_num_tokens: 256, max_num_active_requests: 4,
               chunk_size: 64, audit_every_step: true}
    kv: {tokens_per_block: 16, num_blocks: 256, prefix_reuse: true}
)",
                      CommSettings(kE2eComm));
}

// Runs the bench on `yaml` under kv_aware; its one run's report.
nlohmann::json RunBench(const std::string& name, const std::string& yaml) {
  const std::string tmp = TestTmpDir();
  const std::string config = absl::StrCat(tmp, "/", name, ".yaml");
  std::ofstream(config) << yaml;
  const std::string json_path = absl::StrCat(tmp, "/", name, ".json");
  const std::string log = absl::StrCat(tmp, "/", name, ".log");
  const std::string command = absl::StrCat(
      "timeout 150 ", LockstepBinary(), " bench --workload multi-turn --config ", config,
      " --policies kv_aware --users 3 --concurrency 1 --min-turns 2 --max-turns 3",
      " --system-prompt 64 --min-user 8 --max-user 24 --min-output 8 --max-output 24",
      " --seed 5 --run-dir ", tmp, "/", name, "-runs --json ", json_path, " > ", log, " 2>&1");
  const int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << Slurp(log);
  if (rc != 0) return nullptr;
  const nlohmann::json out = nlohmann::json::parse(Slurp(json_path), nullptr, false);
  EXPECT_FALSE(out.is_discarded()) << Slurp(json_path);
  if (out.is_discarded() || out["runs"].size() != 1) return nullptr;
  return out["runs"][0];
}

void ExpectWorkersReuseTheIdeal(const nlohmann::json& r) {
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["failed"].get<int64_t>(), 0) << r.dump(2);
  EXPECT_GE(r["requests"].get<int64_t>(), 6);
  const double prompt = r["prompt_tokens"].get<double>();
  const double ideal = r["ideal_reused_tokens"].get<double>();
  EXPECT_GT(ideal, 0);
  // Every completed prompt was prefilled once (no pause, no failure) and reused exactly
  // what the ideal says.
  EXPECT_EQ(r["workers"]["prompt_tokens"].get<double>(), prompt) << r.dump(2);
  EXPECT_EQ(r["workers"]["reused_tokens"].get<double>(), ideal) << r.dump(2);
  // Each request's own report, through the worker, the router and RouterService.
  EXPECT_EQ(r["responses"]["cached_tokens"].get<double>(), ideal) << r.dump(2);
  EXPECT_EQ(r["ttft_ms_by_reuse"]["partial"]["turns"].get<int64_t>(), 0) << r.dump(2);
  // The router's view, at routing time, may lag the last block of a reply.
  EXPECT_GE(r["hit_rate"].get<double>(), 0.9 * r["ideal_hit_rate"].get<double>()) << r.dump(2);
  EXPECT_LE(r["router_cached_tokens"].get<double>(), ideal) << r.dump(2);
}

TEST(MultiTurnBenchTest, AggregatedWorkersReuseThePreviousPromptAndReply) {
  const std::string model = TestTmpDir() + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  ExpectWorkersReuseTheIdeal(RunBench("agg", AggregatedYaml(model)));
}

TEST(MultiTurnBenchTest, DisaggregatedContextWorkersReuseThePreviousPrompt) {
  const std::string model = TestTmpDir() + "/models/tiny-moe";
  ASSERT_TRUE(EnsureTinyMoe(model).ok());
  const nlohmann::json r = RunBench("disagg", DisaggYaml(model, /*fault_timeouts=*/false));
  ExpectWorkersReuseTheIdeal(r);
  if (r.is_null()) return;
  // Every generation rank (gen0 is DEP4) reports, and none prefilled a prompt token.
  std::vector<nlohmann::json> generation;
  for (const nlohmann::json& rank : r["workers"]["ranks"]) {
    if (rank["instance"] == "gen0") generation.push_back(rank);
  }
  ASSERT_EQ(generation.size(), 4u) << r["workers"].dump(2);
  for (const nlohmann::json& rank : generation) {
    EXPECT_EQ(rank["prompt_tokens"].get<double>(), 0) << rank.dump();
  }
}

}  // namespace
}  // namespace lockstep::e2e

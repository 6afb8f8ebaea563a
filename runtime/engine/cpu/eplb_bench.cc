// Expert-parallel load balancing on the CPU engine's transformer (docs/perf.md "## EPLB"):
// tiny-dsv3 on 4 in-process ranks (DEP4) with skewed routing (per MoE layer one expert
// made hot, another warm, through e_score_correction_bias), decoding `rows` sequences
// per rank for `steps` steps. It measures the expert load (ExpertLoad) and the step
// time with the contiguous sharding, plans placements from the measured loads with 0,
// 1 and 2 redundant slots per rank (runtime/eplb), and measures again with each.
//
//   bazel run //runtime/engine/cpu:eplb_bench -- [rows per rank, default 16] [steps, 24]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/eplb/placement.h"
#include "runtime/eplb/plan.h"

namespace lockstep::engine {
namespace {

constexpr int kRanks = 4;
constexpr int kTokensPerBlock = 16;

std::string ModelDir() {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "lockstep_eplb_bench_tiny-dsv3").string();
  if (!std::filesystem::exists(dir + "/config.json")) {
    MakeModelOptions options;
    options.preset = "tiny-dsv3";
    options.out_dir = dir;
    options.with_draft = false;
    LOCKSTEP_CHECK_OK(MakeModel(options));
  }
  return dir;
}

struct Result {
  double worst_imbalance = 0;  // max over MoE layers of max/mean records per rank
  double step_ms = 0;          // mean decode step (slowest rank)
  double load_ms = 0;          // loading the ranks' weights for the placement
  ExpertLoadSnapshot loads;
};

// Loads the 4 ranks with `layout` (skewed routing unless `skew` is false), decodes, and
// measures.
Result Run(const std::string& dir, const ExpertLayout& layout, int rows, int steps,
           bool skew = true) {
  const ModelConfig config = LoadModelConfig(dir).value();
  auto tensors = SafetensorsModel::Open(dir).value();
  auto group = comm::MakeInProcessGroup(kRanks);
  std::vector<std::unique_ptr<Transformer>> models;
  std::vector<std::unique_ptr<ExpertLoad>> loads;
  Result result;
  const absl::Time load_start = absl::Now();
  for (int r = 0; r < kRanks; ++r) {
    ModelWeights weights = LoadWeights(*tensors, config, r, kRanks, layout).value();
    for (int l = 0; l < config.num_layers; ++l) {
      if (!skew || !weights.layers[l].is_moe) continue;
      std::vector<float>& bias = weights.layers[l].moe.score_bias;
      bias[(3 * l) % config.num_experts] += 1.0f;        // hot: chosen by nearly every token
      bias[(3 * l + 5) % config.num_experts] += 0.05f;  // warm
    }
    models.push_back(Transformer::Create(
        config, std::move(weights), "target",
        ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(120)}));
    loads.push_back(std::make_unique<ExpertLoad>(config.num_layers, config.num_experts, steps,
                                                 group[r].get(), absl::Seconds(120), "target"));
    models.back()->set_expert_load(loads.back().get());
  }
  result.load_ms = absl::ToDoubleMilliseconds(absl::Now() - load_start);

  const kv::BlockLayout kv_layout = models[0]->Layout(kTokensPerBlock);
  const int per_seq = static_cast<int>(kv_layout.BlocksFor(steps));
  std::vector<double> step_ms(steps, 0.0);
  std::vector<std::thread> threads;
  std::vector<std::vector<double>> rank_ms(kRanks, std::vector<double>(steps));
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> slab(static_cast<size_t>(rows) * per_seq * kv_layout.BlockElements());
      const KvPoolView pool{slab.data(), kv_layout, rows * per_seq};
      std::vector<std::vector<BlockId>> blocks(rows);
      for (int s = 0; s < rows; ++s) {
        for (int b = 0; b < per_seq; ++b) blocks[s].push_back(BlockId(s * per_seq + b));
      }
      uint64_t token = 17 + r;
      for (int step = 0; step < steps; ++step) {
        std::vector<ForwardRow> input_rows;
        std::vector<SequenceKv> kv;
        std::vector<int32_t> logit_rows;
        for (int s = 0; s < rows; ++s) {
          token = token * 6364136223846793005ULL + 1442695040888963407ULL;
          input_rows.push_back({static_cast<int32_t>((token >> 33) % 256), step, s});
          kv.push_back(SequenceKv{absl::MakeConstSpan(blocks[s])});
          logit_rows.push_back(s);
        }
        Arena arena;
        const absl::Time start = absl::Now();
        LOCKSTEP_CHECK_OK(
            models[r]->Forward({input_rows, kv, logit_rows}, pool, arena, nullptr).status());
        rank_ms[r][step] = absl::ToDoubleMilliseconds(absl::Now() - start);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  double total = 0;
  for (int step = 1; step < steps; ++step) {  // the first step warms up
    double slowest = 0;
    for (int r = 0; r < kRanks; ++r) slowest = std::max(slowest, rank_ms[r][step]);
    total += slowest;
  }
  result.step_ms = total / std::max(steps - 1, 1);
  result.loads = loads[0]->Latest();
  for (int l = 0; l < config.num_layers; ++l) {
    if (config.moe_layer[l]) {
      result.worst_imbalance = std::max(result.worst_imbalance, result.loads.RankImbalance(l));
    }
  }
  return result;
}

ExpertLayout ToLayout(const eplb::Placement& placement) {
  ExpertLayout layout;
  for (const eplb::LayerPlacement& layer : placement.layers) layout.push_back(layer.slots);
  return layout;
}

int Main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 16;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 24;
  LOCKSTEP_CHECK(rows > 0 && steps > 1);
  const std::string dir = ModelDir();
  const ModelConfig config = LoadModelConfig(dir).value();
  std::printf("tiny-dsv3 DEP%d, %d rows per rank, %d decode steps, skewed routing\n\n", kRanks,
              rows, steps);
  std::printf("| placement | max/mean records per rank (worst MoE layer) | step ms | plan ms | "
              "load ms |\n|---|---|---|---|---|\n");
  const Result even = Run(dir, {}, rows, steps, /*skew=*/false);
  std::printf("| reference: unskewed routing, contiguous | %.3f | %.2f | - | %.1f |\n",
              even.worst_imbalance, even.step_ms, even.load_ms);
  const Result base = Run(dir, {}, rows, steps);
  std::printf("| contiguous (no plan) | %.3f | %.2f | - | %.1f |\n", base.worst_imbalance,
              base.step_ms, base.load_ms);
  std::vector<std::vector<double>> loads;
  for (int l = 0; l < config.num_layers; ++l) loads.push_back(base.loads.LayerLoads(l));
  for (int redundant : {0, 1, 2}) {
    const absl::Time plan_start = absl::Now();
    const auto plan = eplb::Plan(loads, {.num_ranks = kRanks, .redundant_per_rank = redundant});
    const double plan_ms = absl::ToDoubleMilliseconds(absl::Now() - plan_start);
    LOCKSTEP_CHECK_OK(plan.status());
    const Result r = Run(dir, ToLayout(*plan), rows, steps);
    std::printf("| planned, %d redundant per rank | %.3f | %.2f | %.2f | %.1f |\n", redundant,
                r.worst_imbalance, r.step_ms, plan_ms, r.load_ms);
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::engine

int main(int argc, char** argv) { return lockstep::engine::Main(argc, argv); }

// Expert-parallel load balancing on the CPU engine's transformer (docs/perf/eplb.md):
// tiny-dsv3 on 4 in-process ranks (DEP4) with skewed routing (per MoE layer one expert
// made hot, another warm, through e_score_correction_bias), decoding `rows` sequences
// per rank for `steps` steps. It measures the expert load (ExpertLoad) and the step
// time with the contiguous sharding, plans placements from the measured loads with 0,
// 1 and 2 redundant slots per rank (runtime/eplb), and measures again with each.
// Then live rebalancing (expert_rebalance.h) with 0, 1 and 2 redundant slots: windows
// of `window` forwards, a plan at the first window's end, its weights loaded in the
// background during the second window and adopted at its end; the step time before,
// during the load and after the adoption, and the slowest step around the adoption
// (the hiccup), each row after a run without rebalancing in the same process; each
// live placement change is run twice, with the gained experts read from the checkpoint
// and copied from the peers holding them, with what each costs: the background part
// (reading, or encoding what a rank sends) and the engine thread's part (the copies'
// AllToAllBytes and building the weights; none for the checkpoint).
//
//   bazel run //runtime/engine/cpu:eplb_bench -- [rows per rank, default 16] [steps, 24]
//       [live steps, 0: no live part; default 40] [window, 8]
//       [expert width, default tiny-dsv3's 64: moe_intermediate_size, for larger copies]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/check.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/expert_copy.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/expert_rebalance.h"
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

// tiny-dsv3, its routed experts `width` wide (0: the preset's).
std::string ModelDir(int width) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           absl::StrCat("lockstep_eplb_bench_tiny-dsv3", width > 0 ? "_w" : "",
                                        width > 0 ? absl::StrCat(width) : ""))
                              .string();
  if (!std::filesystem::exists(dir + "/config.json")) {
    if (width > 0) {
      ModelConfig config = PresetConfig("tiny-dsv3").value();
      config.moe_intermediate_size = width;
      LOCKSTEP_CHECK_OK(WriteModel(config, dir, 1, PresetDefaultDType("tiny-dsv3")));
    } else {
      MakeModelOptions options;
      options.preset = "tiny-dsv3";
      options.out_dir = dir;
      options.with_draft = false;
      LOCKSTEP_CHECK_OK(MakeModel(options));
    }
  }
  return dir;
}

// Skews the routing of every MoE layer: one expert hot (chosen by nearly every token),
// one warm, through the selection bias.
void SkewRouting(const ModelConfig& config, ModelWeights& weights) {
  for (int l = 0; l < config.num_layers; ++l) {
    if (!weights.layers[l].is_moe) continue;
    std::vector<float>& bias = weights.layers[l].moe.score_bias;
    bias[(3 * l) % config.num_experts] += 1.0f;
    bias[(3 * l + 5) % config.num_experts] += 0.05f;
  }
}

// This thread's CPU time: the work, whatever else shares the cores.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Decodes `rows` sequences on every rank at once (one thread per rank) for `steps`
// forwards; returns the slowest rank's milliseconds per forward. `after_step(rank,
// step)`, if set, runs on the rank's thread after each of its forwards.
std::vector<double> DecodeOnAllRanks(const std::vector<std::unique_ptr<Transformer>>& models,
                                     int rows, int steps,
                                     const std::function<void(int, int)>& after_step,
                                     std::vector<std::vector<double>>* cpu_ms = nullptr) {
  const kv::BlockLayout kv_layout = models[0]->Layout(kTokensPerBlock);
  const int per_seq = static_cast<int>(kv_layout.BlocksFor(steps));
  std::vector<std::vector<double>> rank_ms(kRanks, std::vector<double>(steps));
  std::vector<std::thread> threads;
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
        const double cpu_start = ThreadCpuMs();
        LOCKSTEP_CHECK_OK(
            models[r]->Forward({input_rows, kv, logit_rows}, pool, arena, nullptr).status());
        rank_ms[r][step] = absl::ToDoubleMilliseconds(absl::Now() - start);
        if (cpu_ms != nullptr) (*cpu_ms)[r][step] = ThreadCpuMs() - cpu_start;
        if (after_step) after_step(r, step);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<double> slowest(steps, 0.0);
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < kRanks; ++r) slowest[step] = std::max(slowest[step], rank_ms[r][step]);
  }
  return slowest;
}

struct Result {
  double worst_imbalance = 0;  // max over MoE layers of max/mean records per rank
  double step_ms = 0;          // mean decode step (slowest rank)
  double load_ms = 0;          // loading the ranks' weights for the placement
  // Each rank's forward on its own thread, in CPU ms (the in-process collectives block,
  // so waiting is not counted): per step the slowest rank's and the ranks' mean,
  // averaged over the steps. With a core per rank a step would take the slowest rank's
  // compute (plus the exchange); a perfectly balanced one, the mean.
  double cpu_slowest_ms = 0;
  double cpu_mean_ms = 0;
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
    if (skew) SkewRouting(config, weights);
    models.push_back(
        Transformer::Create(config, std::move(weights), "target",
                            ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(120)}));
    loads.push_back(std::make_unique<ExpertLoad>(config.num_layers, config.num_experts, steps,
                                                 group[r].get(), absl::Seconds(120), "target"));
    models.back()->set_expert_load(loads.back().get());
  }
  result.load_ms = absl::ToDoubleMilliseconds(absl::Now() - load_start);

  std::vector<std::vector<double>> cpu_ms(kRanks, std::vector<double>(steps, 0.0));
  const std::vector<double> step_ms = DecodeOnAllRanks(models, rows, steps, nullptr, &cpu_ms);
  double total = 0;
  for (int step = 1; step < steps; ++step) {  // the first warms up
    total += step_ms[step];
    double slowest = 0, sum = 0;
    for (int r = 0; r < kRanks; ++r) {
      slowest = std::max(slowest, cpu_ms[r][step]);
      sum += cpu_ms[r][step];
    }
    result.cpu_slowest_ms += slowest / std::max(steps - 1, 1);
    result.cpu_mean_ms += sum / kRanks / std::max(steps - 1, 1);
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

// Live rebalancing: per forward the slowest rank's time, and the forward at whose end
// the new placement was adopted (0: none).
struct LiveResult {
  std::vector<double> step_ms;  // [forward - 1]
  int adopted_at = 0;
  double worst_before = 0;  // worst MoE layer max/mean records per rank, first window
  double worst_after = 0;   // the last window
  double prepare_ms = 0;    // the first rebalance's background part, slowest rank
  // Its engine-thread part: the rank arriving last at the AllToAllBytes waits least
  // (about the copy alone), the first waits for the others too.
  double exchange_min_ms = 0;
  double exchange_max_ms = 0;
  int64_t bytes_received = 0;  // from peers, all ranks
};

// The skewed model on 4 ranks decoding `rows` sequences for `steps` forwards;
// `redundant` < 0: no rebalancing (the baseline), else live rebalancing with that many
// redundant slots per rank, planned at every window's end, the gained experts copied
// from peers or (`peers` false) read from the checkpoint.
LiveResult RunLive(const std::string& dir, int rows, int steps, int window, int redundant,
                   bool peers) {
  const ModelConfig config = LoadModelConfig(dir).value();
  auto tensors = SafetensorsModel::Open(dir).value();
  auto group = comm::MakeInProcessGroup(kRanks);
  std::vector<std::unique_ptr<Transformer>> models;
  std::vector<ExpertLoad*> loads;
  std::vector<const ExpertRebalancer*> rebalancers;
  for (int r = 0; r < kRanks; ++r) {
    ModelWeights weights = LoadWeights(*tensors, config, r, kRanks, {}).value();
    SkewRouting(config, weights);
    models.push_back(
        Transformer::Create(config, std::move(weights), "target",
                            ExpertGroup{group[r].get(), r, kRanks, absl::Seconds(120)}));
    auto load = std::make_unique<ExpertLoad>(config.num_layers, config.num_experts, window,
                                             group[r].get(), absl::Seconds(120), "target");
    loads.push_back(load.get());
    models.back()->OwnExpertLoad(std::move(load));
    if (redundant >= 0) {
      auto rebalancer = std::make_unique<ExpertRebalancer>(
          config, eplb::ContiguousPlacement(config.num_experts, kRanks, config.num_layers),
          models.back()->LoadedMoeWeights(),
          RebalanceOptions{.every_windows = 1,
                           .plan = {.num_ranks = kRanks, .redundant_per_rank = redundant},
                           .copy_from_peers = peers},
          group[r].get(), r, absl::Seconds(120), "target", CheckpointExpertLoader(dir, config, r));
      rebalancers.push_back(rebalancer.get());
      models.back()->OwnRebalancer(std::move(rebalancer));
    }
  }
  std::vector<int> adopted_at(kRanks, 0);
  std::vector<double> prepare_ms(kRanks, 0), exchange_ms(kRanks, 0);
  std::vector<int64_t> received(kRanks, 0);
  LiveResult result;
  result.step_ms = DecodeOnAllRanks(models, rows, steps, [&](int r, int step) {
    if (redundant >= 0 && adopted_at[r] == 0 && rebalancers[r]->adopted() > 0) {
      adopted_at[r] = step + 1;
      const RebalanceCosts& costs = rebalancers[r]->last_costs();
      prepare_ms[r] = absl::ToDoubleMilliseconds(costs.prepare);
      exchange_ms[r] = absl::ToDoubleMilliseconds(costs.exchange);
      received[r] = costs.bytes_received;
    }
    if (r == 0 && loads[0]->window_ended()) {
      double worst = 1;
      const ExpertLoadSnapshot snapshot = loads[0]->Latest();
      for (int l = 0; l < config.num_layers; ++l) {
        if (config.moe_layer[l]) worst = std::max(worst, snapshot.RankImbalance(l));
      }
      if (snapshot.windows == 1) result.worst_before = worst;
      result.worst_after = worst;
    }
  });
  for (int r = 1; r < kRanks; ++r) LOCKSTEP_CHECK(adopted_at[r] == adopted_at[0]);
  result.adopted_at = adopted_at[0];
  for (int r = 0; r < kRanks; ++r) {
    result.prepare_ms = std::max(result.prepare_ms, prepare_ms[r]);
    result.exchange_max_ms = std::max(result.exchange_max_ms, exchange_ms[r]);
    result.exchange_min_ms =
        r == 0 ? exchange_ms[r] : std::min(result.exchange_min_ms, exchange_ms[r]);
    result.bytes_received += received[r];
  }
  return result;
}

// Mean of step_ms over forwards [first, last] (1-based, inclusive).
double MeanMs(const std::vector<double>& step_ms, int first, int last) {
  double total = 0;
  int n = 0;
  for (int f = std::max(first, 1); f <= std::min(last, static_cast<int>(step_ms.size())); ++f) {
    total += step_ms[f - 1];
    ++n;
  }
  return n > 0 ? total / n : 0;
}

double MaxMs(const std::vector<double>& step_ms, int first, int last) {
  double max = 0;
  for (int f = std::max(first, 1); f <= std::min(last, static_cast<int>(step_ms.size())); ++f) {
    max = std::max(max, step_ms[f - 1]);
  }
  return max;
}

void LiveTable(const std::string& dir, int rows, int steps, int window) {
  std::printf(
      "\nlive rebalancing: %d forwards, windows of %d; plan at forward %d, load during "
      "forwards %d-%d, adopt at the end of forward %d\n\n",
      steps, window, window, window + 1, 2 * window, 2 * window);
  std::printf(
      "| run | max/mean first window | last window | adopted at | step ms before "
      "(2-%d) | during load (%d-%d) | slowest step %d-%d | after (%d-%d) | "
      "background ms | engine-thread ms (min-max rank) | MB from peers |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      window, window + 1, 2 * window, 2 * window - 1, 2 * window + 2, 2 * window + 2, steps);
  auto row = [&](const std::string& name, const LiveResult& r) {
    std::printf("| %s | %.3f | %.3f | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f-%.2f | %.2f |\n",
                name.c_str(), r.worst_before, r.worst_after, r.adopted_at,
                MeanMs(r.step_ms, 2, window), MeanMs(r.step_ms, window + 1, 2 * window),
                MaxMs(r.step_ms, 2 * window - 1, 2 * window + 2),
                MeanMs(r.step_ms, 2 * window + 2, steps), r.prepare_ms, r.exchange_min_ms,
                r.exchange_max_ms, static_cast<double>(r.bytes_received) / 1e6);
  };
  for (int redundant : {0, 1, 2}) {
    row("no rebalancing (baseline)", RunLive(dir, rows, steps, window, -1, false));
    row(absl::StrCat("live, ", redundant, " redundant per rank, from the checkpoint"),
        RunLive(dir, rows, steps, window, redundant, false));
    row(absl::StrCat("live, ", redundant, " redundant per rank, copied from peers"),
        RunLive(dir, rows, steps, window, redundant, true));
  }
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The copy alone, without decoding: the 4 ranks' weights under the contiguous sharding
// and a placement planned from `loads`; per trial, on one thread (the work, without the
// ranks' scheduling on shared cores), every rank's weights for the placement built from
// the checkpoint (CheckpointExpertLoader), then from peers: what each rank sends
// encoded and its kept experts copied (EncodeExpertCopies, KeptExperts: the background
// part), then the bytes moved as the in-process AllToAllBytes moves them and the
// received experts decoded (FillCopiedExperts: the engine thread's part). This
// thread's CPU milliseconds (wall milliseconds after the slash), summed over the 4
// ranks, medians over `trials`.
void CopyTable(const std::string& dir, const std::vector<std::vector<double>>& loads, int trials) {
  const ModelConfig config = LoadModelConfig(dir).value();
  auto tensors = SafetensorsModel::Open(dir).value();
  std::vector<ModelWeights> weights;
  std::vector<LayerMoeWeights> moe(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    weights.push_back(LoadWeights(*tensors, config, r, kRanks, {}).value());
  }
  for (int r = 0; r < kRanks; ++r) {
    for (const LayerWeights& layer : weights[r].layers) {
      moe[r].push_back(layer.is_moe
                           ? std::shared_ptr<const MoeWeights>(std::shared_ptr<void>(), &layer.moe)
                           : nullptr);
    }
  }
  const eplb::Placement current =
      eplb::ContiguousPlacement(config.num_experts, kRanks, config.num_layers);
  std::printf(
      "\ncopy alone (one thread; CPU ms / wall ms, summed over the 4 ranks; median of %d "
      "trials)\n\n"
      "| redundant per rank | experts moved | MB copied | checkpoint read | peers: "
      "encode + kept (background) | exchange + decode (engine thread) |\n"
      "|---|---|---|---|---|---|\n",
      trials);
  for (int redundant : {0, 1, 2}) {
    const eplb::Placement next =
        eplb::Plan(loads, {.num_ranks = kRanks, .redundant_per_rank = redundant}, &current).value();
    const std::vector<ExpertCopy> copies =
        PlanExpertCopies(current, next, config.moe_layer).value();
    std::vector<double> read_ms, prepare_ms, exchange_ms, read_cpu, prepare_cpu, exchange_cpu;
    int64_t bytes = 0;
    for (int trial = 0; trial < trials; ++trial) {
      absl::Time start = absl::Now();
      double cpu = ThreadCpuMs();
      for (int r = 0; r < kRanks; ++r) {
        LOCKSTEP_CHECK_OK(CheckpointExpertLoader(dir, config, r)(next, moe[r]).status());
      }
      read_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      read_cpu.push_back(ThreadCpuMs() - cpu);
      start = absl::Now();
      cpu = ThreadCpuMs();
      std::vector<std::vector<std::string>> sent;
      std::vector<std::vector<std::shared_ptr<MoeWeights>>> kept;
      for (int r = 0; r < kRanks; ++r) {
        sent.push_back(EncodeExpertCopies(copies, r, kRanks, moe[r]).value());
        kept.push_back(KeptExperts(r, next, moe[r]));
      }
      prepare_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      prepare_cpu.push_back(ThreadCpuMs() - cpu);
      start = absl::Now();
      cpu = ThreadCpuMs();
      bytes = 0;
      for (int r = 0; r < kRanks; ++r) {
        std::vector<std::string> received(kRanks);
        for (int from = 0; from < kRanks; ++from) {
          received[from] = sent[from][r];
          if (from != r) bytes += static_cast<int64_t>(received[from].size());
        }
        LOCKSTEP_CHECK_OK(FillCopiedExperts(copies, r, received, kept[r]));
      }
      exchange_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      exchange_cpu.push_back(ThreadCpuMs() - cpu);
    }
    std::printf("| %d | %zu | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |\n", redundant,
                copies.size(), static_cast<double>(bytes) / 1e6, Median(read_cpu), Median(read_ms),
                Median(prepare_cpu), Median(prepare_ms), Median(exchange_cpu), Median(exchange_ms));
  }
}

std::string CpuColumn(const Result& r) {
  return absl::StrFormat("%.2f / %.2f (%.2f)", r.cpu_slowest_ms, r.cpu_mean_ms,
                         r.cpu_slowest_ms / std::max(r.cpu_mean_ms, 1e-9));
}

ExpertLayout ToLayout(const eplb::Placement& placement) {
  ExpertLayout layout;
  for (const eplb::LayerPlacement& layer : placement.layers) layout.push_back(layer.slots);
  return layout;
}

int Main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 16;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 24;
  const int live_steps = argc > 3 ? std::atoi(argv[3]) : 40;
  const int window = argc > 4 ? std::atoi(argv[4]) : 8;
  const int width = argc > 5 ? std::atoi(argv[5]) : 0;
  LOCKSTEP_CHECK(rows > 0 && steps > 1 && live_steps >= 0 && window > 0 && width >= 0);
  const std::string dir = ModelDir(width);
  const ModelConfig config = LoadModelConfig(dir).value();
  std::printf(
      "tiny-dsv3 DEP%d, routed experts %d wide, %d rows per rank, %d decode steps, "
      "skewed routing\n\n",
      kRanks, config.moe_intermediate_size, rows, steps);
  std::printf(
      "| placement | max/mean records per rank (worst MoE layer) | step ms | plan ms | "
      "load ms | rank CPU ms per step: slowest / mean (ratio) |\n|---|---|---|---|---|---|\n");
  const Result even = Run(dir, {}, rows, steps, /*skew=*/false);
  std::printf("| reference: unskewed routing, contiguous | %.3f | %.2f | - | %.1f | %s |\n",
              even.worst_imbalance, even.step_ms, even.load_ms, CpuColumn(even).c_str());
  const Result base = Run(dir, {}, rows, steps);
  std::printf("| contiguous (no plan) | %.3f | %.2f | - | %.1f | %s |\n", base.worst_imbalance,
              base.step_ms, base.load_ms, CpuColumn(base).c_str());
  std::vector<std::vector<double>> loads;
  for (int l = 0; l < config.num_layers; ++l) loads.push_back(base.loads.LayerLoads(l));
  for (int redundant : {0, 1, 2}) {
    const absl::Time plan_start = absl::Now();
    const auto plan = eplb::Plan(loads, {.num_ranks = kRanks, .redundant_per_rank = redundant});
    const double plan_ms = absl::ToDoubleMilliseconds(absl::Now() - plan_start);
    LOCKSTEP_CHECK_OK(plan.status());
    const Result r = Run(dir, ToLayout(*plan), rows, steps);
    std::printf("| planned, %d redundant per rank | %.3f | %.2f | %.2f | %.1f | %s |\n", redundant,
                r.worst_imbalance, r.step_ms, plan_ms, r.load_ms, CpuColumn(r).c_str());
  }
  CopyTable(dir, loads, 7);
  if (live_steps > 0) LiveTable(dir, rows, live_steps, window);
  return 0;
}

}  // namespace
}  // namespace lockstep::engine

int main(int argc, char** argv) { return lockstep::engine::Main(argc, argv); }

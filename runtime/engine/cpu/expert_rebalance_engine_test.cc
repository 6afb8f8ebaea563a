// Live expert rebalancing through the whole CPU engine, switched on by its options
// (CpuEngineOptions::expert_load_window, expert_rebalance_windows, expert_redundant_slots,
// as the worker sets them from the instance's eplb: block): DEP4 on a tiny-dsv3 with
// skewed routing (per MoE layer one hot and one warm expert). The four engines step in
// lockstep (every step on every rank, idle ranks pad), so each window ends, and each
// placement is adopted, at the same forward on every rank. Checked: greedy outputs and
// their log-probabilities are bitwise those of the same DEP4 engines without
// rebalancing; every rank published the same windows; the windows after the adoption
// are balanced (max/mean records per rank) where the first was not, so a placement was
// adopted. The rebalancing engines load from a copy of the checkpoint that is removed
// once they are built, so the experts a rank gains can only come from its peers
// (CpuEngineOptions::expert_copy_from_peers, set here).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/engine/cpu/testing/mini_host.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::CustomModelDir;
using ::lockstep::engine::testing::HostOptions;
using ::lockstep::engine::testing::HostOutput;
using ::lockstep::engine::testing::HostPool;
using ::lockstep::engine::testing::HostRequest;
using ::lockstep::engine::testing::MiniHost;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

constexpr int kRanks = 4;
constexpr int kWindow = 4;  // forwards per expert-load window

// tiny-dsv3 in f32, one safetensors file, with routing skewed through the routers'
// correction bias (choice only): per MoE layer expert 3l mod E hot, 3l + 5 warm.
std::string SkewedModelDir() {
  const ModelConfig config = PresetConfig("tiny-dsv3").value();
  const std::string dir = CustomModelDir(config, "dsv3_skewed");
  std::vector<TensorToWrite> tensors = GenerateTensors(config, 1, DType::kF32, nullptr, 0.0);
  int skewed = 0;
  for (TensorToWrite& tensor : tensors) {
    for (int l = 0; l < config.num_layers; ++l) {
      if (!config.moe_layer[l] || tensor.name != RouterBiasName(l)) continue;
      tensor.values[(3 * l) % config.num_experts] += 1.0f;
      tensor.values[(3 * l + 5) % config.num_experts] += 0.05f;
      ++skewed;
    }
  }
  LOCKSTEP_CHECK(skewed > 0) << "no router bias in tiny-dsv3";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".safetensors") != std::string::npos) std::filesystem::remove(entry.path());
  }
  LOCKSTEP_CHECK_OK(WriteSafetensors(JoinPath(dir, "model.safetensors"), tensors));
  return dir;
}

struct Rank {
  std::unique_ptr<HostPool> pool;
  std::unique_ptr<ModelEngine> engine;
  std::unique_ptr<MiniHost> host;
  ExpertLoadBoard board;
};

// Four engines on `group`; `rebalance`: measure, plan every window with one redundant
// slot per rank, adopt at the next window's end.
std::vector<std::unique_ptr<Rank>> MakeRanks(
    const std::string& dir, bool rebalance, std::vector<std::unique_ptr<comm::Communicator>>& group,
    uint64_t seed) {
  group = comm::MakeInProcessGroup(kRanks);
  const kv::BlockLayout layout = ModelBlockLayout(dir, 8).value();
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->pool = std::make_unique<HostPool>(layout, 256, seed + r);
    CpuEngineOptions options;
    options.model_dir = dir;
    options.target_storage = rank->pool->storage();
    options.target_layout = layout;
    options.target_num_blocks = 256;
    options.communicator = group[r].get();
    options.rank = r;
    options.world_size = kRanks;
    options.collective_timeout = absl::Seconds(60);
    if (rebalance) {
      options.expert_load_window = kWindow;
      options.expert_load_board = &rank->board;
      options.expert_rebalance_windows = 1;
      options.expert_redundant_slots = 1;
      options.expert_copy_from_peers = true;
    }
    rank->engine = std::move(CreateCpuEngine(options)).value();
    rank->host = std::make_unique<MiniHost>(
        rank->engine.get(), rank->pool.get(), nullptr,
        HostOptions{.chunk_size = 8 + 3 * r, .max_batch = 2 + r, .dummy_id = -1 - r});
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

TEST(ExpertRebalanceEngineTest, GreedyOutputsAcrossALiveRebalanceEqualNoRebalance) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = SkewedModelDir();
  const int per_rank[kRanks] = {3, 2, 0, 3};  // rank 2 only pads
  std::vector<std::vector<HostRequest>> requests(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < per_rank[r]; ++i) {
      HostRequest request;
      request.id = 100 * (r + 1) + i;
      request.prompt.push_back(kByteBosToken);
      const int length = 6 + static_cast<int>(rng() % 20);
      for (int t = 1; t < length; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % 256));
      request.sampling.max_tokens = 24 + static_cast<int32_t>(rng() % 8);
      request.sampling.logprobs = 1;
      request.sampling.ignore_eos = true;
      requests[r].push_back(std::move(request));
    }
  }

  std::vector<std::vector<std::unique_ptr<comm::Communicator>>> groups(2);
  std::vector<std::vector<std::unique_ptr<Rank>>> runs;
  std::vector<ExpertLoadSnapshot> windows;  // rank 0's, each once
  for (bool rebalance : {false, true}) {
    if (!rebalance) {
      runs.push_back(MakeRanks(dir, rebalance, groups[0], seed));
    } else {
      const std::string copy = dir + "_removed_after_load";
      std::filesystem::remove_all(copy);
      std::filesystem::copy(dir, copy, std::filesystem::copy_options::recursive);
      runs.push_back(MakeRanks(copy, rebalance, groups[1], seed));
      std::filesystem::remove_all(copy);
      ASSERT_FALSE(std::filesystem::exists(copy));
    }
    std::vector<std::unique_ptr<Rank>>& ranks = runs.back();
    for (int r = 0; r < kRanks; ++r) {
      for (const HostRequest& request : requests[r]) ranks[r]->host->Add(request);
    }
    for (int step = 0;; ++step) {
      ASSERT_LT(step, 1000);
      bool all_done = true;
      for (const auto& rank : ranks) all_done = all_done && rank->host->Done();
      if (all_done) break;
      for (auto& rank : ranks) ASSERT_THAT(rank->host->Launch(/*pad=*/true), IsOk());
      for (auto& rank : ranks) ASSERT_THAT(rank->host->Collect(), IsOk());
      if (!rebalance) continue;
      const ExpertLoadSnapshot latest = ranks[0]->board.Latest();
      if (latest.windows > static_cast<int64_t>(windows.size())) {
        ASSERT_EQ(latest.windows, static_cast<int64_t>(windows.size()) + 1) << "step " << step;
        for (int r = 1; r < kRanks; ++r) {
          EXPECT_EQ(ranks[r]->board.Latest().Format(), latest.Format())
              << "rank " << r << " published another window at step " << step;
        }
        windows.push_back(latest);
      }
    }
    for (const auto& rank : ranks) EXPECT_TRUE(rank->host->pools_clean());
  }

  for (int r = 0; r < kRanks; ++r) {
    for (const HostRequest& request : requests[r]) {
      const HostOutput& got = runs[1][r]->host->output(request.id);
      const HostOutput& want = runs[0][r]->host->output(request.id);
      EXPECT_EQ(got.tokens, want.tokens) << "rank " << r << " request " << request.id;
      ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
      for (size_t t = 0; t < want.logprobs.size(); ++t) {
        EXPECT_EQ(got.logprobs[t][0].logprob, want.logprobs[t][0].logprob)
            << "rank " << r << " request " << request.id << " token " << t;
      }
    }
  }

  // Window 1 ran on the contiguous sharding; its plan was adopted at window 2's end, so
  // windows 3 on ran on planned placements. Their records per rank are summed (the
  // last windows hold few rows each).
  const ModelConfig config = PresetConfig("tiny-dsv3").value();
  ASSERT_GE(windows.size(), 4u);
  auto worst = [&](const std::vector<int64_t>& computed) {
    double imbalance = 1;
    for (int l = 0; l < config.num_layers; ++l) {
      if (!config.moe_layer[l]) continue;
      int64_t total = 0, max = 0;
      for (int r = 0; r < kRanks; ++r) {
        total += computed[static_cast<size_t>(l) * kRanks + r];
        max = std::max(max, computed[static_cast<size_t>(l) * kRanks + r]);
      }
      if (total > 0) imbalance = std::max(imbalance, static_cast<double>(max) * kRanks / total);
    }
    return imbalance;
  };
  EXPECT_GE(worst(windows[0].computed), 1.5) << windows[0].Format();
  std::vector<int64_t> after(windows[0].computed.size(), 0);
  for (size_t w = 2; w < windows.size(); ++w) {
    for (size_t i = 0; i < after.size(); ++i) after[i] += windows[w].computed[i];
  }
  EXPECT_LE(worst(after), 1.3) << windows[2].Format();
}

}  // namespace
}  // namespace lockstep::engine

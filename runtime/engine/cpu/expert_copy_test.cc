// Peer copies of routed experts (expert_copy.h): which rank sends what, and tiny-moe's
// experts encoded by the ranks holding them, exchanged as AllToAllBytes would, and
// assembled into each rank's weights under a new placement, bit for bit those of the
// checkpoint; missing or cut bytes are DataLoss naming the sender.
#include "runtime/engine/cpu/expert_copy.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/safetensors.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::PresetModelDir;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

eplb::Placement OneLayer(std::vector<std::vector<int>> slots, int num_experts) {
  eplb::Placement placement;
  placement.num_experts = num_experts;
  placement.num_ranks = static_cast<int>(slots.size());
  placement.layers.push_back({std::move(slots)});
  return placement;
}

TEST(ExpertCopyTest, EachGainedSlotGetsOneSenderSpreadOverTheHolders) {
  // Expert 0 is held by ranks 0 and 1 and gained by ranks 2 and 3: one copy from each
  // holder. Expert 5 moves from rank 2 to rank 0.
  const eplb::Placement current = OneLayer({{0, 1}, {0, 2}, {3, 5}, {4}}, 6);
  const eplb::Placement next = OneLayer({{0, 1, 5}, {0, 2}, {0, 3}, {0, 4}}, 6);
  const auto copies = PlanExpertCopies(current, next, {true});
  ASSERT_THAT(copies.status(), IsOk());
  const std::vector<ExpertCopy> want = {
      {.layer = 0, .expert = 5, .from = 2, .to = 0},
      {.layer = 0, .expert = 0, .from = 0, .to = 2},
      {.layer = 0, .expert = 0, .from = 1, .to = 3},
  };
  EXPECT_EQ(*copies, want);
  // A layer that is not MoE copies nothing.
  EXPECT_TRUE(PlanExpertCopies(current, next, {false})->empty());
}

TEST(ExpertCopyTest, AnExpertNobodyHoldsIsAnError) {
  const eplb::Placement current = OneLayer({{0}, {1}}, 3);
  const eplb::Placement next = OneLayer({{0, 2}, {1}}, 3);
  EXPECT_THAT(
      PlanExpertCopies(current, next, {true}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expert 2 is held by no rank")));
  EXPECT_THAT(PlanExpertCopies(current, OneLayer({{0, 1, 2}}, 3), {true}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// tiny-moe's weights on `world` ranks under the contiguous sharding.
struct Ranks {
  ModelConfig config;
  std::vector<std::unique_ptr<ModelWeights>> weights;
  std::vector<LayerMoeWeights> moe;
};

Ranks LoadRanks(int world) {
  const std::string dir = PresetModelDir("tiny-moe");
  auto tensors = std::move(SafetensorsModel::Open(dir)).value();
  Ranks ranks;
  ranks.config = LoadModelConfig(dir).value();
  for (int r = 0; r < world; ++r) {
    ranks.weights.push_back(
        std::make_unique<ModelWeights>(LoadWeights(*tensors, ranks.config, r, world, {}).value()));
    LayerMoeWeights moe;
    for (const LayerWeights& layer : ranks.weights.back()->layers) {
      moe.push_back(layer.is_moe
                        ? std::shared_ptr<const MoeWeights>(std::shared_ptr<void>(), &layer.moe)
                        : nullptr);
    }
    ranks.moe.push_back(std::move(moe));
  }
  return ranks;
}

// Every MoE layer: rank r gains expert (2r + 2) mod 8 and keeps its own two.
eplb::Placement Shifted(const ModelConfig& config, int world) {
  eplb::Placement next = eplb::ContiguousPlacement(config.num_experts, world, config.num_layers);
  for (eplb::LayerPlacement& layer : next.layers) {
    for (int r = 0; r < world; ++r) {
      layer.slots[r].push_back((2 * r + 2) % config.num_experts);
      std::sort(layer.slots[r].begin(), layer.slots[r].end());
    }
  }
  return next;
}

// received[to][from] = sent[from][to], as AllToAllBytes delivers them.
std::vector<std::vector<std::string>> Exchange(const std::vector<ExpertCopy>& copies,
                                               const Ranks& ranks, int world) {
  std::vector<std::vector<std::string>> received(world, std::vector<std::string>(world));
  for (int from = 0; from < world; ++from) {
    auto sent = EncodeExpertCopies(copies, from, world, ranks.moe[from]);
    EXPECT_THAT(sent.status(), IsOk());
    for (int to = 0; to < world; ++to) received[to][from] = (*sent)[to];
  }
  return received;
}

TEST(ExpertCopyTest, CopiedExpertsAreTheCheckpointsBitForBit) {
  constexpr int kWorld = 4;
  const Ranks ranks = LoadRanks(kWorld);
  ASSERT_EQ(ranks.config.num_experts, 8);
  const Ranks full = LoadRanks(1);  // every expert, as the checkpoint has it
  const eplb::Placement current =
      eplb::ContiguousPlacement(ranks.config.num_experts, kWorld, ranks.config.num_layers);
  const eplb::Placement next = Shifted(ranks.config, kWorld);
  const auto copies = PlanExpertCopies(current, next, ranks.config.moe_layer);
  ASSERT_THAT(copies.status(), IsOk());
  const auto received = Exchange(*copies, ranks, kWorld);
  int checked = 0;
  for (int r = 0; r < kWorld; ++r) {
    const auto got = AssembleExperts(*copies, r, next, ranks.moe[r], received[r]);
    ASSERT_THAT(got.status(), IsOk()) << "rank " << r;
    for (size_t l = 0; l < got->size(); ++l) {
      if ((*got)[l] == nullptr) continue;
      const MoeWeights& moe = *(*got)[l];
      EXPECT_EQ(moe.held, next.layers[l].slots[r]);
      ASSERT_EQ(moe.experts.size(), moe.held.size());
      EXPECT_EQ(moe.replicas, eplb::ReplicaRanks(next.layers[l], ranks.config.num_experts));
      for (size_t i = 0; i < moe.held.size(); ++i) {
        const SwiGluWeights& want = full.moe[0][l]->experts[moe.held[i]];
        EXPECT_EQ(moe.experts[i].width, want.width);
        EXPECT_EQ(moe.experts[i].gate_up.n(), want.gate_up.n());
        EXPECT_EQ(moe.experts[i].down.k(), want.down.k());
        const auto same = [](absl::Span<const float> a, absl::Span<const float> b) {
          return a.size() == b.size() &&
                 std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        EXPECT_TRUE(same(moe.experts[i].gate_up.panels(), want.gate_up.panels()))
            << "layer " << l << " rank " << r << " expert " << moe.held[i];
        EXPECT_TRUE(same(moe.experts[i].down.panels(), want.down.panels()));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(ExpertCopyTest, MissingOrCutBytesAreDataLossNamingTheSender) {
  constexpr int kWorld = 4;
  const Ranks ranks = LoadRanks(kWorld);
  const eplb::Placement current =
      eplb::ContiguousPlacement(ranks.config.num_experts, kWorld, ranks.config.num_layers);
  const eplb::Placement next = Shifted(ranks.config, kWorld);
  const auto copies = PlanExpertCopies(current, next, ranks.config.moe_layer);
  ASSERT_THAT(copies.status(), IsOk());
  // Rank 0 gains expert 2 from rank 1.
  auto received = Exchange(*copies, ranks, kWorld);
  ASSERT_FALSE(received[0][1].empty());
  std::vector<std::string> cut = received[0];
  cut[1].resize(cut[1].size() - 1);
  EXPECT_THAT(AssembleExperts(*copies, 0, next, ranks.moe[0], cut).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("from rank 1")));
  std::vector<std::string> empty = received[0];
  empty[1].clear();
  EXPECT_THAT(AssembleExperts(*copies, 0, next, ranks.moe[0], empty).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("from rank 1")));
  std::vector<std::string> extra = received[0];
  extra[2] += "x";
  EXPECT_THAT(AssembleExperts(*copies, 0, next, ranks.moe[0], extra).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("rank 2 sent more")));
  // A sender asked for an expert it does not hold.
  EXPECT_THAT(
      EncodeExpertCopies({{.layer = 1, .expert = 7, .from = 0, .to = 1}}, 0, kWorld, ranks.moe[0])
          .status(),
      StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace lockstep::engine

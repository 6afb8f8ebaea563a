// Under expert parallelism a rank reads only its own experts' tensors: loading a rank's
// weight plan through SafetensorsModel touches every other tensor once and no routed
// expert of another rank, counted by the model's read log (names and bytes), not by
// timing.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/weight_plan.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;

// The routed expert a tensor belongs to, or -1 (shared experts and the rest).
int RoutedExpertOf(const std::string& name) {
  static const std::regex kExpert(R"(\.experts\.(\d+)\.)");
  std::smatch match;
  if (!std::regex_search(name, match, kExpert)) return -1;
  return std::stoi(match[1].str());
}

void ReadPlan(const SafetensorsModel& tensors, const ModelPlan& plan) {
  for (const WeightSource* weight : plan.All()) {
    ASSERT_THAT(ReadWeight(tensors, *weight).status(), IsOk()) << weight->label;
  }
}

class ExpertReadTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExpertReadTest, EachRankReadsOnlyItsExperts) {
  absl::StatusOr<ModelConfig> config = PresetConfig(GetParam());
  ASSERT_THAT(config, IsOk());
  MakeModelOptions options;
  options.preset = GetParam();
  options.out_dir = JoinPath(std::getenv("TEST_TMPDIR"), GetParam());
  options.with_draft = false;
  options.dtype = DType::kBF16;
  const bool fp8 = GetParam() == "tiny-dsv3-fp8";
  ASSERT_THAT(MakeModel(options), IsOk());

  constexpr int kWorld = 4;
  uint64_t expert_bytes_of_all_ranks = 0;
  uint64_t shared_bytes = 0;
  std::vector<int> readers(config->num_experts, 0);
  for (int rank = 0; rank < kWorld; ++rank) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank << " of " << kWorld);
    absl::StatusOr<std::unique_ptr<SafetensorsModel>> tensors =
        SafetensorsModel::Open(options.out_dir);
    ASSERT_THAT(tensors, IsOk());
    ReadPlan(**tensors, PlanWeights(*config, rank, kWorld));
    const ExpertRange own = ExpertsOfRank(config->num_experts, rank, kWorld);
    uint64_t bytes = 0;
    uint64_t expert_bytes = 0;
    std::vector<bool> seen(config->num_experts, false);
    for (const std::string& name : (*tensors)->ReadNames()) {
      const TensorView* view = *(*tensors)->Find(name);
      bytes += view->bytes;
      const int expert = RoutedExpertOf(name);
      if (expert < 0) continue;
      EXPECT_TRUE(expert >= own.first && expert < own.end)
          << name << " belongs to another rank (own experts " << own.first << ".." << own.end
          << ")";
      expert_bytes += view->bytes;
      seen[expert] = true;
    }
    EXPECT_EQ((*tensors)->BytesRead(), bytes);
    if (fp8) {  // the experts' FP8 weights came with their scales
      const std::vector<std::string> names = (*tensors)->ReadNames();
      const std::string scale = absl::StrCat("model.layers.1.mlp.experts.", own.first,
                                             ".down_proj.weight_scale_inv");
      EXPECT_TRUE(std::find(names.begin(), names.end(), scale) != names.end()) << scale;
    }
    for (int e = 0; e < config->num_experts; ++e) readers[e] += seen[e];
    expert_bytes_of_all_ranks += expert_bytes;
    const uint64_t rest = bytes - expert_bytes;
    if (rank == 0) shared_bytes = rest;
    EXPECT_EQ(rest, shared_bytes) << "every rank reads the same non-expert tensors";
  }
  // Every routed expert is read by exactly one rank.
  EXPECT_EQ(readers, std::vector<int>(config->num_experts, 1));

  // One rank of one reads everything: the ranks' expert bytes add up to its.
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> all = SafetensorsModel::Open(options.out_dir);
  ASSERT_THAT(all, IsOk());
  ReadPlan(**all, PlanWeights(*config, 0, 1));
  EXPECT_EQ((*all)->BytesRead(), shared_bytes + expert_bytes_of_all_ranks);
}

// tiny-dsv3-fp8: sharded, FP8 experts with their block scales, shared experts (read by
// every rank).
INSTANTIATE_TEST_SUITE_P(Presets, ExpertReadTest,
                         ::testing::Values("tiny-moe", "tiny-dsv3", "tiny-dsv3-fp8"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace lockstep::engine

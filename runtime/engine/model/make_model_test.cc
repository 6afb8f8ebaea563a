#include "runtime/engine/model/make_model.h"

#include <cstdlib>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

std::string OutDir(const std::string& name) { return JoinPath(std::getenv("TEST_TMPDIR"), name); }

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> data = ReadFileToString(path);
  EXPECT_THAT(data, IsOk());
  return data.ok() ? *data : "";
}

TEST(MakeModelTest, SameSeedSameBytesOtherSeedOtherWeights) {
  for (const char* preset : {"tiny", "tiny-moe"}) {
    MakeModelOptions options;
    options.preset = preset;
    options.seed = 7;
    options.out_dir = OutDir(std::string(preset) + "_a");
    ASSERT_THAT(MakeModel(options), IsOk());
    options.out_dir = OutDir(std::string(preset) + "_b");
    ASSERT_THAT(MakeModel(options), IsOk());
    options.seed = 8;
    options.out_dir = OutDir(std::string(preset) + "_c");
    ASSERT_THAT(MakeModel(options), IsOk());
    for (const char* file : {"config.json", "model.safetensors", "lockstep_tokenizer.json",
                             "draft/config.json", "draft/model.safetensors"}) {
      const std::string a = Read(JoinPath(OutDir(std::string(preset) + "_a"), file));
      EXPECT_FALSE(a.empty()) << file;
      EXPECT_EQ(a, Read(JoinPath(OutDir(std::string(preset) + "_b"), file)))
          << preset << " " << file;
    }
    EXPECT_NE(Read(JoinPath(OutDir(std::string(preset) + "_a"), "model.safetensors")),
              Read(JoinPath(OutDir(std::string(preset) + "_c"), "model.safetensors")));
  }
}

TEST(MakeModelTest, WritesALoadableModelTokenizerAndDraft) {
  MakeModelOptions options;
  options.preset = "tiny-moe";
  options.out_dir = OutDir("layout");
  ASSERT_THAT(MakeModel(options), IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(options.out_dir);
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model_type, "mixtral");
  EXPECT_EQ(config->num_experts, 8);
  EXPECT_EQ(config->num_experts_per_tok, 2);
  EXPECT_GE(config->vocab_size, 258);
  EXPECT_LE(config->vocab_size, 320);
  EXPECT_EQ(config->eos_token_id, kByteEosToken);

  const nlohmann::json tokenizer =
      nlohmann::json::parse(Read(JoinPath(options.out_dir, "lockstep_tokenizer.json")));
  EXPECT_EQ(tokenizer, (nlohmann::json{{"type", "byte_level"},
                                       {"vocab_size", config->vocab_size},
                                       {"bos_token_id", 256},
                                       {"eos_token_id", 257}}));

  absl::StatusOr<ModelConfig> draft = LoadModelConfig(JoinPath(options.out_dir, "draft"));
  ASSERT_THAT(draft, IsOk());
  EXPECT_LT(draft->num_layers, config->num_layers);
  EXPECT_EQ(draft->vocab_size, config->vocab_size);
  EXPECT_FALSE(draft->is_moe());

  // Every tensor the configs name is present with its shape, and the draft shares the
  // embedding and LM head exactly.
  auto target_tensors = SafetensorsModel::Open(options.out_dir);
  auto draft_tensors = SafetensorsModel::Open(JoinPath(options.out_dir, "draft"));
  ASSERT_THAT(target_tensors, IsOk());
  ASSERT_THAT(draft_tensors, IsOk());
  for (const TensorSpec& spec : ModelTensorSpecs(*config)) {
    EXPECT_THAT((*target_tensors)->ReadFloat(spec.name, spec.shape), IsOk()) << spec.name;
  }
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
    const std::vector<int64_t> shape = {config->vocab_size, config->hidden_size};
    EXPECT_EQ(*(*target_tensors)->ReadFloat(name, shape), *(*draft_tensors)->ReadFloat(name, shape))
        << name;
  }
}

TEST(MakeModelTest, PerturbationKnobChangesOnlyTheDraftLayers) {
  MakeModelOptions options;
  options.out_dir = OutDir("knob_a");
  options.draft_perturbation = 0.0;
  ASSERT_THAT(MakeModel(options), IsOk());
  options.out_dir = OutDir("knob_b");
  options.draft_perturbation = 1.0;
  ASSERT_THAT(MakeModel(options), IsOk());
  EXPECT_EQ(Read(JoinPath(OutDir("knob_a"), "model.safetensors")),
            Read(JoinPath(OutDir("knob_b"), "model.safetensors")));
  EXPECT_NE(Read(JoinPath(OutDir("knob_a"), "draft/model.safetensors")),
            Read(JoinPath(OutDir("knob_b"), "draft/model.safetensors")));
  // With no perturbation the draft's layer 0 is the target's layer 0.
  auto target = SafetensorsModel::Open(OutDir("knob_a"));
  auto draft = SafetensorsModel::Open(JoinPath(OutDir("knob_a"), "draft"));
  ASSERT_THAT(target, IsOk());
  ASSERT_THAT(draft, IsOk());
  const std::string q = AttentionName(0, "q_proj", "weight");
  EXPECT_EQ(*(*target)->ReadFloat(q, {128, 128}), *(*draft)->ReadFloat(q, {128, 128}));
}

TEST(MakeModelTest, RejectsBadOptions) {
  MakeModelOptions options;
  options.preset = "huge";
  options.out_dir = OutDir("bad");
  EXPECT_THAT(MakeModel(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("preset")));
  options.preset = "tiny";
  options.out_dir = "";
  EXPECT_THAT(MakeModel(options), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out")));
}

}  // namespace
}  // namespace lockstep::engine

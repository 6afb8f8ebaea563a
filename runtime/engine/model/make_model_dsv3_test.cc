// make-model's DeepSeek-V3-family presets are written in the checkpoint's format:
// config.json that parses back (quantization_config for the FP8 variant), three shards
// with an index, the layers' projections F8_E4M3 with F32 block scales of the right
// grid, the rest BF16 (the routers' correction bias F32), and the Hugging Face
// tokenizer files with the family's special tokens and chat template.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/fp8.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/make_model_tokenizer.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using Json = nlohmann::json;

std::string Make(const std::string& preset) {
  MakeModelOptions options;
  options.preset = preset;
  options.out_dir = JoinPath(std::getenv("TEST_TMPDIR"), preset);
  options.dtype = PresetDefaultDType(preset);
  EXPECT_THAT(MakeModel(options), IsOk());
  return options.out_dir;
}

Json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_THAT(text, IsOk()) << path;
  return Json::parse(text.ok() ? *text : "null", nullptr, false);
}

TEST(MakeModelDsv3Test, Fp8PresetHasTheCheckpointFormat) {
  const std::string dir = Make("tiny-dsv3-fp8");
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->model_type, "deepseek_v3");
  EXPECT_TRUE(config->mla);
  EXPECT_TRUE(config->fp8.enabled);
  const Json json = ReadJson(JoinPath(dir, "config.json"));
  EXPECT_EQ(json["quantization_config"]["quant_method"], "fp8");
  EXPECT_EQ(json["quantization_config"]["weight_block_size"], Json({128, 128}));

  const Json index = ReadJson(JoinPath(dir, "model.safetensors.index.json"));
  std::set<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) shards.insert(shard);
  EXPECT_GE(shards.size(), 2u);
  EXPECT_TRUE(shards.contains("model-00001-of-00003.safetensors"));

  absl::StatusOr<std::unique_ptr<SafetensorsModel>> tensors = SafetensorsModel::Open(dir);
  ASSERT_THAT(tensors, IsOk());
  int fp8 = 0;
  for (const TensorSpec& spec : ModelTensorSpecs(*config)) {
    SCOPED_TRACE(spec.name);
    absl::StatusOr<const TensorView*> view = (*tensors)->Find(spec.name);
    ASSERT_THAT(view, IsOk());
    EXPECT_EQ((*view)->shape, spec.shape);
    const bool projection = spec.layer >= 0 && (absl::EndsWith(spec.name, "_proj.weight") ||
                                                 absl::EndsWith(spec.name, "_with_mqa.weight"));
    EXPECT_EQ(spec.fp8, projection);
    if (spec.fp8) {
      ++fp8;
      EXPECT_EQ((*view)->dtype, DType::kF8E4M3);
      absl::StatusOr<const TensorView*> scale = (*tensors)->Find(Fp8ScaleName(spec.name));
      ASSERT_THAT(scale, IsOk());
      EXPECT_EQ((*scale)->dtype, DType::kF32);
      EXPECT_EQ((*scale)->shape, Fp8ScaleShape(spec.shape[0], spec.shape[1]));
      EXPECT_EQ(index["weight_map"][spec.name], index["weight_map"][Fp8ScaleName(spec.name)]);
    } else if (spec.role == TensorRole::kRouterBias) {
      EXPECT_EQ((*view)->dtype, DType::kF32);
    } else {
      EXPECT_EQ((*view)->dtype, DType::kBF16);
    }
    EXPECT_THAT((*tensors)->ReadFloat(spec.name, spec.shape).status(), IsOk());
  }
  EXPECT_GT(fp8, 10);
}

// The FP8 preset's weights are the BF16 preset's, quantized: within half an E4M3 step of
// the block's scale (plus the BF16 rounding of the reference).
TEST(MakeModelDsv3Test, Fp8WeightsApproximateTheBf16Ones) {
  const std::string bf16_dir = Make("tiny-dsv3");
  const std::string fp8_dir = Make("tiny-dsv3-fp8");
  auto bf16 = SafetensorsModel::Open(bf16_dir);
  auto fp8 = SafetensorsModel::Open(fp8_dir);
  ASSERT_THAT(bf16, IsOk());
  ASSERT_THAT(fp8, IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(fp8_dir);
  ASSERT_THAT(config, IsOk());
  for (const TensorSpec& spec : ModelTensorSpecs(*config)) {
    if (!spec.fp8) continue;
    SCOPED_TRACE(spec.name);
    absl::StatusOr<std::vector<float>> a = (*bf16)->ReadFloat(spec.name, spec.shape);
    absl::StatusOr<std::vector<float>> b = (*fp8)->ReadFloat(spec.name, spec.shape);
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    double max_abs = 0.0;
    for (float v : *a) max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
    double changed = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      const double error = std::fabs((*a)[i] - (*b)[i]);
      ASSERT_LE(error, std::fabs((*a)[i]) * (0.0625 + 0.008) + max_abs * 1e-3) << i;
      changed += error > 0;
    }
    EXPECT_GT(changed, 0) << "FP8 should round something";
  }
}

TEST(MakeModelDsv3Test, WritesTheFamilysTokenizerFiles) {
  const std::string dir = Make("tiny-dsv3");
  const Json tokenizer = ReadJson(JoinPath(dir, "tokenizer.json"));
  ASSERT_TRUE(tokenizer.is_object());
  EXPECT_EQ(tokenizer["model"]["type"], "BPE");
  EXPECT_EQ(tokenizer["pre_tokenizer"]["pretokenizers"].size(), 4u);
  EXPECT_EQ(tokenizer["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], "\\p{N}{1,3}");
  std::set<int> ids;
  for (const auto& [token, id] : tokenizer["model"]["vocab"].items()) ids.insert(id.get<int>());
  EXPECT_EQ(ids.size(), static_cast<size_t>(DeepseekTokenizerVocabSize()));
  EXPECT_EQ(*ids.rbegin(), DeepseekTokenizerVocabSize() - 1) << "ids must be dense";
  EXPECT_EQ(tokenizer["model"]["vocab"][kDeepseekBosToken], kByteBosToken);
  EXPECT_EQ(tokenizer["model"]["vocab"][kDeepseekEosToken], kByteEosToken);
  EXPECT_TRUE(tokenizer["model"]["vocab"].contains(kDeepseekUserToken));
  const Json config = ReadJson(JoinPath(dir, "tokenizer_config.json"));
  EXPECT_EQ(config["chat_template"], DeepseekChatTemplate());
  EXPECT_EQ(config["bos_token"]["content"], kDeepseekBosToken);
  EXPECT_EQ(config["eos_token"]["content"], kDeepseekEosToken);
  EXPECT_EQ(ReadJson(JoinPath(dir, "generation_config.json"))["eos_token_id"], kByteEosToken);
  EXPECT_FALSE(std::filesystem::exists(JoinPath(dir, "lockstep_tokenizer.json")));
  absl::StatusOr<ModelConfig> model = LoadModelConfig(dir);
  ASSERT_THAT(model, IsOk());
  EXPECT_GE(model->vocab_size, DeepseekTokenizerVocabSize());
  // The draft is a one-layer llama of the same vocabulary.
  absl::StatusOr<ModelConfig> draft = LoadModelConfig(JoinPath(dir, "draft"));
  ASSERT_THAT(draft, IsOk());
  EXPECT_EQ(draft->model_type, "llama");
  EXPECT_EQ(draft->vocab_size, model->vocab_size);
}

}  // namespace
}  // namespace lockstep::engine

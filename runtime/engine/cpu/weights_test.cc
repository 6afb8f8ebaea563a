#include "runtime/engine/cpu/weights.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/cpu_engine.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::engine::testing::HostPool;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Dir(const std::string& name) { return JoinPath(std::getenv("TEST_TMPDIR"), name); }

// Writes the tiny model's config and `tensors` to a fresh directory.
std::string WriteWith(const std::string& name, const ModelConfig& config,
                      const std::vector<TensorToWrite>& tensors) {
  const std::string dir = Dir(name);
  LOCKSTEP_CHECK_OK(MakeDirectories(dir));
  LOCKSTEP_CHECK_OK(WriteStringToFile(JoinPath(dir, "config.json"), ModelConfigToJson(config)));
  LOCKSTEP_CHECK_OK(WriteSafetensors(JoinPath(dir, "model.safetensors"), tensors));
  return dir;
}

ModelConfig Tiny() { return *PresetConfig("tiny"); }

std::vector<TensorToWrite> TinyTensors(DType dtype = DType::kF32) {
  return GenerateTensors(Tiny(), 1, dtype, nullptr, 0.0);
}

absl::Status LoadStatus(const std::string& dir) {
  return Transformer::Load(dir, "target", ExpertGroup{}).status();
}

TEST(WeightsTest, MissingTensorNamesTensorAndFile) {
  std::vector<TensorToWrite> tensors = TinyTensors();
  const std::string missing = DenseMlpName(2, ExpertPart::kDown);
  std::erase_if(tensors, [&](const TensorToWrite& t) { return t.name == missing; });
  const std::string dir = WriteWith("missing", Tiny(), tensors);
  EXPECT_THAT(LoadStatus(dir), StatusIs(absl::StatusCode::kNotFound,
                                        AllOf(HasSubstr(missing), HasSubstr("model.safetensors"))));
}

TEST(WeightsTest, WrongShapeNamesTensorFileAndShapes) {
  std::vector<TensorToWrite> tensors = TinyTensors();
  const std::string name = AttentionName(1, "k_proj", "weight");
  for (TensorToWrite& t : tensors) {
    if (t.name == name) {
      t.shape = {32, 128};
      t.values.resize(32 * 128);
    }
  }
  const std::string dir = WriteWith("shape", Tiny(), tensors);
  EXPECT_THAT(LoadStatus(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                        AllOf(HasSubstr(name), HasSubstr("model.safetensors"),
                                              HasSubstr("[32, 128]"), HasSubstr("[64, 128]"))));
}

TEST(WeightsTest, ConfigThatDisagreesWithTheWeights) {
  ModelConfig config = Tiny();
  config.hidden_size = 64;
  const std::string dir = WriteWith("mismatch", config, TinyTensors());
  EXPECT_THAT(LoadStatus(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model.embed_tokens.weight"), HasSubstr("[272, 128]"))));
}

TEST(WeightsTest, TruncatedAndCorruptFilesAreErrorsNotCrashes) {
  const std::string dir = WriteWith("truncated", Tiny(), TinyTensors());
  const std::string path = JoinPath(dir, "model.safetensors");
  const std::string bytes = *ReadFileToString(path);
  ASSERT_THAT(WriteStringToFile(path, bytes.substr(0, bytes.size() - 1000)), IsOk());
  EXPECT_THAT(LoadStatus(dir), StatusIs(absl::StatusCode::kDataLoss,
                                        AllOf(HasSubstr(path), HasSubstr("truncated"))));
  std::string corrupt = bytes;
  for (int i = 20; i < 60; ++i) corrupt[i] = '\x7f';
  ASSERT_THAT(WriteStringToFile(path, corrupt), IsOk());
  EXPECT_THAT(LoadStatus(dir), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
  ASSERT_THAT(WriteStringToFile(path, ""), IsOk());
  EXPECT_THAT(LoadStatus(dir), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
  // Through the engine factory as well.
  std::vector<float> slab(1 << 16);
  CpuEngineOptions options;
  options.model_dir = dir;
  options.target_storage = slab.data();
  options.target_layout = kv::BlockLayout{4, 2, 32, 1};
  options.target_num_blocks = 1;
  EXPECT_THAT(CreateCpuEngine(options), StatusIs(absl::StatusCode::kDataLoss, HasSubstr(path)));
}

// Last-position logits of a fixed prompt.
std::vector<float> PromptLogits(const std::string& dir) {
  auto model = std::move(Transformer::Load(dir, "target", ExpertGroup{})).value();
  HostPool pool(model->Layout(16), 8, 1);
  std::vector<BlockId> blocks;
  LOCKSTEP_CHECK_OK(pool.Cover(blocks, 10));
  const std::vector<int32_t> tokens = {256, 72, 101, 108, 108, 111, 32, 119, 111, 114};
  std::vector<ForwardRow> rows;
  for (int i = 0; i < 10; ++i) rows.push_back({tokens[i], i, 0});
  const std::vector<SequenceKv> seqs = {SequenceKv{absl::MakeConstSpan(blocks)}};
  const std::vector<int32_t> logit_rows = {9};
  Arena arena;
  const float* logits = *model->Forward({rows, seqs, logit_rows}, pool.view(), arena, nullptr);
  return std::vector<float>(logits, logits + model->config().vocab_size);
}

TEST(WeightsTest, HalfPrecisionFilesLoadAsFloat) {
  const std::vector<float> f32 = PromptLogits(WriteWith("f32", Tiny(), TinyTensors(DType::kF32)));
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const std::vector<float> half =
        PromptLogits(WriteWith(DTypeName(dtype), Tiny(), TinyTensors(dtype)));
    double max_diff = 0, max_value = 0;
    for (size_t i = 0; i < f32.size(); ++i) {
      max_diff = std::max(max_diff, std::fabs(double{f32[i]} - half[i]));
      max_value = std::max(max_value, std::fabs(double{f32[i]}));
    }
    EXPECT_LT(max_diff, 0.05 * max_value) << DTypeName(dtype);
    EXPECT_GT(max_diff, 0.0) << DTypeName(dtype) << " should round something";
  }
}

TEST(WeightsTest, ShardedModelEqualsSingleFile) {
  const std::vector<TensorToWrite> tensors = TinyTensors();
  const std::string dir = Dir("sharded");
  ASSERT_THAT(MakeDirectories(dir), IsOk());
  ASSERT_THAT(WriteStringToFile(JoinPath(dir, "config.json"), ModelConfigToJson(Tiny())), IsOk());
  std::vector<TensorToWrite> shards[2];
  std::string index = "{\"weight_map\": {";
  for (size_t i = 0; i < tensors.size(); ++i) {
    shards[i % 2].push_back(tensors[i]);
    index += (i ? ", \"" : "\"") + tensors[i].name + "\": \"part-" + std::to_string(i % 2) +
             ".safetensors\"";
  }
  index += "}}";
  for (int s = 0; s < 2; ++s) {
    ASSERT_THAT(
        WriteSafetensors(JoinPath(dir, "part-" + std::to_string(s) + ".safetensors"), shards[s]),
        IsOk());
  }
  ASSERT_THAT(WriteStringToFile(JoinPath(dir, "model.safetensors.index.json"), index), IsOk());
  EXPECT_EQ(PromptLogits(dir), PromptLogits(WriteWith("single", Tiny(), tensors)));
}

TEST(WeightsTest, ExpertParallelRankLoadsOnlyItsExperts) {
  const ModelConfig config = *PresetConfig("tiny-moe");
  const std::string dir =
      WriteWith("moe", config, GenerateTensors(config, 1, DType::kF32, nullptr, 0.0));
  auto tensors = std::move(SafetensorsModel::Open(dir)).value();
  absl::StatusOr<ModelWeights> weights = LoadWeights(*tensors, config, 1, 4);
  ASSERT_THAT(weights, IsOk());
  for (const LayerWeights& layer : weights->layers) {
    ASSERT_TRUE(layer.is_moe);
    EXPECT_EQ(layer.moe.local.first, 2);
    EXPECT_EQ(layer.moe.local.end, 4);
    EXPECT_EQ(layer.moe.experts.size(), 2u);
    EXPECT_EQ(layer.moe.router.n(), 8);
  }
}

}  // namespace
}  // namespace lockstep::engine

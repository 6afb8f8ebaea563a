// make-model's tiny-dsv3-mtp preset: the tiny DeepSeek-V3 target plus one MTP layer
// (model.layers.3.*) in the checkpoint's names and shapes, built to track the target:
// its decoder layer is a copy of the target's last, eh_proj is [I | 0.1 I], the shared
// head copies the target's final norm and LM head, and the embedding is shared (left
// out). The target's own tensors are those of tiny-dsv3.
#include <cstdlib>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/make_model.h"
#include "runtime/engine/model/model_config.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/engine/model/tensor_names.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;

std::string Make(const std::string& preset) {
  MakeModelOptions options;
  options.preset = preset;
  options.out_dir = JoinPath(std::getenv("TEST_TMPDIR"), preset);
  options.dtype = PresetDefaultDType(preset);
  options.with_draft = false;
  EXPECT_THAT(MakeModel(options), IsOk());
  return options.out_dir;
}

std::vector<float> Read(const SafetensorsModel& model, const std::string& name,
                        const std::vector<int64_t>& shape) {
  absl::StatusOr<std::vector<float>> values = model.ReadFloat(name, shape);
  EXPECT_THAT(values, IsOk()) << name;
  return values.ok() ? *values : std::vector<float>();
}

TEST(MakeModelMtpTest, TheMtpLayerIsInTheCheckpointAndTracksTheTarget) {
  const std::string dir = Make("tiny-dsv3-mtp");
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_THAT(config, IsOk());
  EXPECT_EQ(config->num_nextn_predict_layers, 1);
  const int layers = config->num_layers;
  const int64_t hidden = config->hidden_size;
  const int64_t vocab = config->vocab_size;
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> model = SafetensorsModel::Open(dir);
  ASSERT_THAT(model, IsOk());
  const SafetensorsModel& m = **model;
  EXPECT_FALSE(m.Contains(LayerName(layers, "embed_tokens.weight"))) << "shared, left out";
  EXPECT_EQ(Read(m, LayerName(layers, "enorm.weight"), {hidden}),
            std::vector<float>(hidden, 1.0f));
  EXPECT_EQ(Read(m, LayerName(layers, "hnorm.weight"), {hidden}),
            std::vector<float>(hidden, 1.0f));
  const std::vector<float> eh = Read(m, LayerName(layers, "eh_proj.weight"), {hidden, 2 * hidden});
  ASSERT_EQ(eh.size(), static_cast<size_t>(hidden * 2 * hidden));
  EXPECT_EQ(eh[0], 1.0f);
  EXPECT_EQ(eh[1], 0.0f);
  EXPECT_NEAR(eh[hidden], 0.1f, 1e-3);  // bf16
  EXPECT_EQ(Read(m, LayerName(layers, "shared_head.norm.weight"), {hidden}),
            Read(m, FinalNormName(), {hidden}));
  EXPECT_EQ(Read(m, LayerName(layers, "shared_head.head.weight"), {vocab, hidden}),
            Read(m, LmHeadName(), {vocab, hidden}));
  // The decoder layer copies the target's last, tensor for tensor.
  const std::string kv_a = "self_attn.kv_a_proj_with_mqa.weight";
  const int64_t kv_a_rows = config->mla_dims.kv_lora_rank + config->mla_dims.qk_rope_head_dim;
  EXPECT_EQ(Read(m, LayerName(layers, kv_a), {kv_a_rows, hidden}),
            Read(m, LayerName(layers - 1, kv_a), {kv_a_rows, hidden}));
  EXPECT_EQ(Read(m, LayerName(layers, "mlp.gate.weight"), {config->num_experts, hidden}),
            Read(m, LayerName(layers - 1, "mlp.gate.weight"), {config->num_experts, hidden}));
  EXPECT_TRUE(m.Contains(LayerName(layers, "mlp.shared_experts.down_proj.weight")));
  EXPECT_TRUE(m.Contains(LayerName(layers, "mlp.experts.7.up_proj.weight")));
}

TEST(MakeModelMtpTest, TheTargetIsTinyDsv3) {
  const std::string with = Make("tiny-dsv3-mtp");
  const std::string without = Make("tiny-dsv3");
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> a = SafetensorsModel::Open(with);
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> b = SafetensorsModel::Open(without);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  absl::StatusOr<ModelConfig> config = LoadModelConfig(without);
  ASSERT_THAT(config, IsOk());
  const int64_t hidden = config->hidden_size;
  EXPECT_EQ(Read(**a, LayerName(1, "mlp.gate.weight"), {config->num_experts, hidden}),
            Read(**b, LayerName(1, "mlp.gate.weight"), {config->num_experts, hidden}));
  EXPECT_FALSE((*b)->Contains(LayerName(config->num_layers, "eh_proj.weight")));
}

}  // namespace
}  // namespace lockstep::engine

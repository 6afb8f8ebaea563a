#include "tools/cli/make_model_command.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model/file_io.h"
#include "runtime/engine/model/safetensors.h"
#include "runtime/router/model_text.h"
#include "runtime/router/testing/test_tokenizer.h"

namespace lockstep::cli {
namespace {

using ::lockstep::testing::IsOk;

std::string OutDir(const std::string& name) {
  return engine::JoinPath(std::getenv("TEST_TMPDIR"), name);
}

TEST(MakeModelCommandTest, CommandWritesFilesAndRejectsBadFlags) {
  const std::string out = OutDir("command");
  EXPECT_EQ(
      RunMakeModelCommand({"--preset", "tiny", "--out", out, "--seed", "3", "--dtype", "bf16"}), 0);
  auto tensors = engine::SafetensorsModel::Open(out);
  ASSERT_THAT(tensors, IsOk());
  EXPECT_EQ((*(*tensors)->Find("model.norm.weight"))->dtype, engine::DType::kBF16);
  EXPECT_EQ(RunMakeModelCommand({"--preset", "tiny", "--out", out, "--dtype", "int8"}), 2);
  EXPECT_EQ(RunMakeModelCommand({"--preset", "nope", "--out", out}), 2);
  EXPECT_EQ(RunMakeModelCommand({"--bogus"}), 2);
}

TEST(MakeModelCommandTest, TokenizerDirectoryGivesVocabularySpecialTokensAndFiles) {
  const std::string tokenizer = OutDir("tokenizer");
  std::filesystem::create_directories(tokenizer);
  std::ofstream(engine::JoinPath(tokenizer, "tokenizer.json")) << router::testing::TokenizerJson();
  std::ofstream(engine::JoinPath(tokenizer, "tokenizer_config.json"))
      << R"({"bos_token": "<s>", "eos_token": "<|end|>", "chat_template": "{{ x }}"})";
  const std::string out = OutDir("with_tokenizer");
  ASSERT_EQ(RunMakeModelCommand({"--preset", "tiny", "--out", out, "--tokenizer", tokenizer}), 0);
  absl::StatusOr<std::string> config_text = engine::ReadFileToString(out + "/config.json");
  ASSERT_THAT(config_text, IsOk());
  const nlohmann::json config = nlohmann::json::parse(*config_text);
  EXPECT_EQ(config["vocab_size"], 302);
  EXPECT_EQ(config["bos_token_id"], 301);
  EXPECT_EQ(config["eos_token_id"], 300);
  absl::StatusOr<router::ModelText> text = router::LoadModelText(out);
  ASSERT_THAT(text, IsOk());
  EXPECT_TRUE(text->tokenizer->is_hf());
  EXPECT_EQ(text->chat_template, "{{ x }}");
  EXPECT_EQ(text->eos_token_ids, std::vector<int32_t>{300});  // generation_config.json
  EXPECT_FALSE(std::filesystem::exists(engine::JoinPath(out, "lockstep_tokenizer.json")));
  // A directory without tokenizer.json is refused.
  EXPECT_EQ(RunMakeModelCommand({"--preset", "tiny", "--out", out, "--tokenizer", out + "/draft"}),
            2);
}

}  // namespace
}  // namespace lockstep::cli

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
#include "runtime/router/testing/test_tokenizer.h"
#include "runtime/router/text/model_text.h"

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

// The DeepSeek preset: bf16 by default, and tokenizer files the router serves: its
// tokenizer encodes with the family's special tokens and pre-tokenizer rules, and its
// chat template renders the family's prompt shape, tool calls and outputs included.
TEST(MakeModelCommandTest, Dsv3PresetWritesServableTokenizerFiles) {
  const std::string out = OutDir("dsv3");
  ASSERT_EQ(RunMakeModelCommand({"--preset", "tiny-dsv3", "--out", out}), 0);
  auto tensors = engine::SafetensorsModel::Open(out);
  ASSERT_THAT(tensors, IsOk());
  EXPECT_EQ((*(*tensors)->Find("model.norm.weight"))->dtype, engine::DType::kBF16);
  absl::StatusOr<router::ModelText> text = router::LoadModelText(out);
  ASSERT_THAT(text, IsOk());
  ASSERT_TRUE(text->tokenizer->is_hf());
  EXPECT_EQ(text->bos_token_id, 256);
  EXPECT_EQ(text->eos_token_ids, std::vector<int32_t>{257});
  const router::ServingTokenizer& tokenizer = *text->tokenizer;
  // Special tokens are single ids; " the" is one merged token; digits split in runs of 3.
  const std::vector<int32_t> ids = tokenizer.Encode("<｜User｜> the 12345<｜Assistant｜>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 259);
  EXPECT_EQ(ids.back(), 260);
  EXPECT_EQ(tokenizer.Decode({ids[1]}), " the");
  EXPECT_EQ(tokenizer.Decode(ids), "<｜User｜> the 12345<｜Assistant｜>");
  const std::string mixed = "Café 你好 ｶﾀｶﾅ!! \n\n  x=1234;";
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(mixed)), mixed);

  ASSERT_NE(tokenizer.chat_template(), nullptr);
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "S1"},
    {"role": "system", "content": "S2"},
    {"role": "user", "content": "w?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "get", "arguments": "{\"a\":1}"}},
      {"type": "function", "function": {"name": "put", "arguments": "{}"}}]},
    {"role": "tool", "content": "r1"},
    {"role": "tool", "content": "r2"},
    {"role": "assistant", "content": "done"},
    {"role": "user", "content": "more"}])");
  absl::StatusOr<std::string> prompt =
      tokenizer.chat_template()->Render(messages, nullptr, /*add_generation_prompt=*/true);
  ASSERT_THAT(prompt, IsOk());
  EXPECT_EQ(*prompt,
            "<｜begin▁of▁sentence｜>S1\n\nS2<｜User｜>w?<｜Assistant｜><｜tool▁calls▁begin｜>"
            "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get\n```json\n{\"a\":1}\n```"
            "<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>put\n```json\n{}\n```"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
            "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>r1<｜tool▁output▁end｜>\n"
            "<｜tool▁output▁begin｜>r2<｜tool▁output▁end｜><｜tool▁outputs▁end｜>done"
            "<｜end▁of▁sentence｜><｜User｜>more<｜Assistant｜>");
}

}  // namespace
}  // namespace lockstep::cli

#include "runtime/router/text/model_text.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/testing/test_tokenizer.h"
#include "runtime/router/text/generated_text.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

using testing::TokenizerJson;

class ModelTextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
  }
  void Write(const std::string& name, const json& doc) { std::ofstream(dir_ / name) << doc.dump(); }
  std::filesystem::path dir_;
};

TEST_F(ModelTextTest, ReadsTheTokenizerItsSpecialTokensTemplateAndEosIds) {
  Write("tokenizer.json", TokenizerJson());
  Write("tokenizer_config.json", {{"bos_token", "<s>"},
                                  {"eos_token", {{"content", "<|end|>"}, {"lstrip", false}}},
                                  {"chat_template", "{{ bos_token }}{{ messages[0].content }}"}});
  Write("generation_config.json", {{"eos_token_id", {300, 7}}});
  absl::StatusOr<ModelText> text = LoadModelText(dir_.string());
  ASSERT_THAT(text, IsOk());
  EXPECT_TRUE(text->tokenizer->is_hf());
  EXPECT_EQ(text->bos_token, "<s>");
  EXPECT_EQ(text->bos_token_id, 301);
  EXPECT_EQ(text->eos_token, "<|end|>");
  EXPECT_EQ(text->eos_token_id, 300);
  EXPECT_THAT(text->eos_token_ids, ElementsAre(300, 7));
  EXPECT_EQ(text->chat_template, "{{ bos_token }}{{ messages[0].content }}");
  ASSERT_NE(text->tokenizer->chat_template(), nullptr);
  EXPECT_EQ(
      *text->tokenizer->chat_template()->Render(
          nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), nullptr, true),
      "<s>hi");

  // Text in and out through the HF tokenizer; generated text skips special tokens and
  // stop strings work on the decoded text.
  const ServingTokenizer& tokenizer = *text->tokenizer;
  EXPECT_THAT(tokenizer.Encode("he he<|end|>"), ElementsAre(256, 0x20, 256, 300));
  EXPECT_EQ(tokenizer.Decode({256, 0x20, 256, 300}), "he he<|end|>");
  GeneratedText generated(tokenizer, {" h"});
  EXPECT_EQ(generated.Push({256, 300}), "he");
  EXPECT_EQ(generated.Push({0x20}), "");
  EXPECT_EQ(generated.Push({256}), "");
  EXPECT_TRUE(generated.stopped());
  EXPECT_EQ(tokenizer.TokenName(300), "<|end|>");
  EXPECT_EQ(tokenizer.TokenBytes(0x20), " ");
}

// clean_up_tokenization_spaces changes /v1/detokenize's text (transformers' decode),
// never the generated text.
TEST_F(ModelTextTest, CleanUpTokenizationSpacesAppliesToDetokenizeOnly) {
  Write("tokenizer.json", TokenizerJson());
  const std::vector<int32_t> ids = {'a', ' ', '.', ' ', '\'', 's'};
  for (const bool clean_up : {false, true}) {
    SCOPED_TRACE(clean_up);
    Write("tokenizer_config.json", {{"clean_up_tokenization_spaces", clean_up}});
    absl::StatusOr<ModelText> text = LoadModelText(dir_.string());
    ASSERT_THAT(text, IsOk());
    const ServingTokenizer& tokenizer = *text->tokenizer;
    EXPECT_EQ(tokenizer.Detokenize(ids), clean_up ? "a.'s" : "a . 's");
    EXPECT_EQ(tokenizer.Decode(ids), "a . 's");
    GeneratedText generated(tokenizer, {});
    EXPECT_EQ(generated.Push(ids) + generated.Finish(), "a . 's");
  }
  Write("tokenizer_config.json", {{"clean_up_tokenization_spaces", "yes"}});
  EXPECT_THAT(LoadModelText(dir_.string()).status().message(),
              HasSubstr("tokenizer_config.json: clean_up_tokenization_spaces must be a boolean"));
}

TEST_F(ModelTextTest, EosFallsBackToTheTokenizerConfigAndErrorsNameTheFile) {
  Write("tokenizer.json", TokenizerJson());
  Write("tokenizer_config.json", {{"eos_token", "<|end|>"}});
  absl::StatusOr<ModelText> text = LoadModelText(dir_.string());
  ASSERT_THAT(text, IsOk());
  EXPECT_THAT(text->eos_token_ids, ElementsAre(300));
  EXPECT_EQ(text->chat_template, "");

  Write("tokenizer_config.json", {{"eos_token", "<|missing|>"}});
  EXPECT_THAT(LoadModelText(dir_.string()).status().message(),
              HasSubstr("tokenizer_config.json: eos_token '<|missing|>' is not a token"));
}

TEST_F(ModelTextTest, AnUnsupportedChatTemplateIsALoadError) {
  Write("tokenizer.json", TokenizerJson());
  Write("tokenizer_config.json", {{"chat_template", "{% frobnicate %}"}});
  EXPECT_THAT(LoadModelText(dir_.string()).status().message(),
              HasSubstr("tokenizer_config.json: chat_template:"));
}

TEST_F(ModelTextTest, GenerationConfigIdsMustBeInTheVocabulary) {
  Write("tokenizer.json", TokenizerJson());
  Write("generation_config.json", {{"eos_token_id", 5000}});
  const std::string message(LoadModelText(dir_.string()).status().message());
  EXPECT_THAT(message, HasSubstr("generation_config.json: eos_token_id 5000 is outside the "
                                 "vocabulary"))
      << message;
}

TEST_F(ModelTextTest, GenerationConfigSamplingBecomesTheDefaults) {
  Write("tokenizer.json", TokenizerJson());
  Write("generation_config.json", {{"eos_token_id", 300},
                                   {"do_sample", true},
                                   {"temperature", 0.6},
                                   {"top_p", 0.9},
                                   {"top_k", 20},
                                   {"repetition_penalty", 1.05}});
  absl::StatusOr<ModelText> text = LoadModelText(dir_.string());
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(text->sampling_defaults.temperature, 0.6f);
  EXPECT_EQ(text->sampling_defaults.top_p, 0.9f);
  EXPECT_EQ(text->sampling_defaults.top_k, 20);
  EXPECT_EQ(text->sampling_defaults.repetition_penalty, 1.05f);

  // Fields the model does not set stay unset (the OpenAI defaults apply).
  Write("generation_config.json", {{"eos_token_id", 300}, {"temperature", 1}});
  text = LoadModelText(dir_.string());
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(text->sampling_defaults.temperature, 1.0f);
  EXPECT_FALSE(text->sampling_defaults.top_p.has_value());
  EXPECT_FALSE(text->sampling_defaults.top_k.has_value());
  EXPECT_FALSE(text->sampling_defaults.repetition_penalty.has_value());
}

TEST_F(ModelTextTest, GenerationConfigSamplingOutsideTheRequestRangesIsALoadError) {
  Write("tokenizer.json", TokenizerJson());
  for (const auto& [field, value, expected] :
       std::vector<std::tuple<std::string, json, std::string>>{
           {"temperature", 2.5, "temperature must be a number in [0, 2]"},
           {"temperature", "0.7", "temperature must be a number in [0, 2]"},
           {"top_p", 0, "top_p must be a number in (0, 1]"},
           {"repetition_penalty", 0, "repetition_penalty must be a number in (0, 2]"},
           {"top_k", -1, "top_k must be an integer >= 0"},
           {"top_k", 1.5, "top_k must be an integer >= 0"}}) {
    Write("generation_config.json", {{field, value}});
    const std::string message(LoadModelText(dir_.string()).status().message());
    EXPECT_THAT(message, HasSubstr("generation_config.json: " + expected)) << field << "=" << value;
  }
}

TEST_F(ModelTextTest, WithoutTokenizerJsonTheByteTokenizerServes) {
  std::ofstream(dir_ / "lockstep_tokenizer.json")
      << R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257})";
  absl::StatusOr<ModelText> text = LoadModelText(dir_.string());
  ASSERT_THAT(text, IsOk());
  EXPECT_FALSE(text->tokenizer->is_hf());
  EXPECT_EQ(text->eos_token_id, 257);
  EXPECT_TRUE(text->eos_token_ids.empty());
  EXPECT_THAT(text->tokenizer->Encode("hi"), ElementsAre('h', 'i'));
  EXPECT_FALSE(text->sampling_defaults.temperature.has_value());

  Write("generation_config.json", {{"temperature", 0.5}});
  text = LoadModelText(dir_.string());
  ASSERT_THAT(text, IsOk());
  EXPECT_EQ(text->sampling_defaults.temperature, 0.5f);
}

}  // namespace
}  // namespace lockstep::router

#include "runtime/router/http/tokenize_api.h"

#include <memory>

#include "common/testing/status_matchers.h"
#include "fmt/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/testing/test_tokenizer.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

const ServingTokenizer& Tokenizer() {
  static const ServingTokenizer tokenizer(*tok::ByteTokenizer::Create(300, 256, 257));
  return tokenizer;
}

const RequestLimits kLimits{.model = "m", .max_prompt_tokens = 100, .vocab_size = 300};

TEST(TokenizeApiTest, TokenizesAPromptAndAChat) {
  absl::StatusOr<std::string> body =
      Tokenize(R"({"model": "m", "prompt": "hé"})", Tokenizer(), kLimits);
  ASSERT_THAT(body, IsOk());
  EXPECT_EQ(json::parse(*body),
            (json{{"tokens", {'h', 0xC3, 0xA9}}, {"count", 3}, {"max_model_len", 100}}));

  body = Tokenize(R"({"model": "m", "messages": [{"role": "user", "content": "q"}]})", Tokenizer(),
                  kLimits);
  ASSERT_THAT(body, IsOk());
  EXPECT_EQ(Tokenizer().Decode(json::parse(*body)["tokens"].get<std::vector<int32_t>>()),
            "<|user|>\nq\n<|assistant|>\n");
}

TEST(TokenizeApiTest, DetokenizeIsTheInverse) {
  absl::StatusOr<std::string> body =
      Detokenize(R"({"model": "m", "tokens": [104, 195, 169, 257]})", Tokenizer(), kLimits);
  ASSERT_THAT(body, IsOk());
  EXPECT_EQ(json::parse(*body)["prompt"], "h\xC3\xA9");
}

// /v1/detokenize is transformers' decode: special tokens shown, and the model's
// clean_up_tokenization_spaces applied.
TEST(TokenizeApiTest, DetokenizeCleansUpWhenTheModelSaysSo) {
  absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> hf =
      tok::HfTokenizer::FromJson(testing::TokenizerJson().dump(), "test");
  ASSERT_THAT(hf, IsOk());
  const ServingTokenizer tokenizer(std::shared_ptr<const tok::HfTokenizer>(*std::move(hf)), nullptr,
                                   /*clean_up_tokenization_spaces=*/true);
  absl::StatusOr<std::string> body =
      Detokenize(R"({"model": "m", "tokens": [256, 32, 33, 301]})", tokenizer,
                 RequestLimits{.model = "m", .vocab_size = 302});
  ASSERT_THAT(body, IsOk());
  EXPECT_EQ(json::parse(*body)["prompt"], "he!<s>");
}

// As Hugging Face's tokenizers decode (transformers' decode): an invalid run of
// byte-fallback tokens is one U+FFFD per byte ([<0xF0>, <0x9F>] is two), where the
// generated text's rule writes one per maximal invalid subsequence.
TEST(TokenizeApiTest, DetokenizeReplacesEachByteOfAnInvalidByteRun) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"a", 259}};
  for (int b = 0; b < 256; ++b) {
    vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  }
  const json config = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array()},
        {"unk_token", "<unk>"},
        {"byte_fallback", true}}},
      {"decoder",
       {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}}};
  absl::StatusOr<std::unique_ptr<tok::HfTokenizer>> hf =
      tok::HfTokenizer::FromJson(config.dump(), "test");
  ASSERT_THAT(hf, IsOk());
  const ServingTokenizer tokenizer(std::shared_ptr<const tok::HfTokenizer>(*std::move(hf)));
  const RequestLimits limits{.model = "m", .vocab_size = 260};
  absl::StatusOr<std::string> body =
      Detokenize(fmt::format(R"({{"model": "m", "tokens": [{}, {}]}})", 3 + 0xF0, 3 + 0x9F),
                 tokenizer, limits);
  ASSERT_THAT(body, IsOk());
  EXPECT_EQ(json::parse(*body)["prompt"], "\uFFFD\uFFFD");
  body = Detokenize(fmt::format(R"({{"model": "m", "tokens": [{}, {}, 259]}})", 3 + 0xC3, 3 + 0xA9),
                    tokenizer, limits);
  ASSERT_THAT(body, IsOk());
  EXPECT_EQ(json::parse(*body)["prompt"], "\u00e9a");
  // Generated text keeps its own rule (streaming equals the whole).
  EXPECT_EQ(tokenizer.Decode({3 + 0xF0, 3 + 0x9F}), "\uFFFD");
}

TEST(TokenizeApiTest, ErrorsNameTheField) {
  absl::StatusOr<std::string> body =
      Tokenize(R"({"model": "other", "prompt": "x"})", Tokenizer(), kLimits);
  EXPECT_THAT(body, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(ErrorCodeOf(body.status()), "model_not_found");
  body = Tokenize(R"({"model": "m"})", Tokenizer(), kLimits);
  EXPECT_EQ(ParamOf(body.status()), "prompt");
  body =
      Tokenize(R"({"model": "m", "prompt": "x", "add_special_tokens": 1})", Tokenizer(), kLimits);
  EXPECT_EQ(ParamOf(body.status()), "add_special_tokens");
  body = Tokenize(R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", Tokenizer(),
                  kLimits);
  EXPECT_EQ(ParamOf(body.status()), "messages");
  body = Detokenize(R"({"model": "m", "tokens": [1, 300]})", Tokenizer(), kLimits);
  EXPECT_THAT(body, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Token 300")));
  EXPECT_EQ(ParamOf(body.status()), "tokens");
  body = Detokenize(R"({"model": "m", "tokens": "abc"})", Tokenizer(), kLimits);
  EXPECT_EQ(ParamOf(body.status()), "tokens");
}

}  // namespace
}  // namespace lockstep::router

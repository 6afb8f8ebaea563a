// The bounds every request body is parsed within (request_fields.h, docs/security.md
// §6), on the parsers of /v1/completions, /v1/chat/completions, /v1/tokenize and
// /v1/detokenize: JSON nested deeper than 64 levels or holding too many values is
// refused before anything reads it (the issue's examples crashed the router with a
// stack overflow), stop_token_ids and logit_bias are bounded, and integers outside
// their range are refused rather than truncated.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/openai_api.h"
#include "runtime/router/http/request_fields.h"
#include "runtime/router/http/tokenize_api.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr ApiKind kC = ApiKind::kCompletion;
constexpr ApiKind kChat = ApiKind::kChat;
const RequestLimits kLimits{.model = "m", .max_prompt_tokens = 100, .vocab_size = 300};

const ServingTokenizer& Tokenizer() {
  static const ServingTokenizer tokenizer(*tok::ByteTokenizer::Create(300, 256, 257));
  return tokenizer;
}

absl::StatusOr<OpenAiRequest> Parse(ApiKind kind, const std::string& body) {
  return ParseOpenAiRequest(kind, body, Tokenizer(), {}, RequestJsonBounds(kLimits));
}

// `depth` arrays (or objects {"a": ...}) around 1.
std::string Nested(int depth, bool objects = false) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += objects ? R"({"a":)" : "[";
  text += "1";
  for (int i = 0; i < depth; ++i) text += objects ? "}" : "]";
  return text;
}

const auto kTooDeep = StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("The request body is JSON nested deeper than 64 levels"));

// The issue's examples, and a deep value in every field a later step copies, dumps,
// compares or converts: refused as a whole (no param), never rendered or echoed.
TEST(RequestBoundsTest, DeepBodiesAreRefusedBeforeAnythingReadsThem) {
  const std::string arrays = Nested(100000);
  const std::string objects = Nested(100000, /*objects=*/true);
  const std::string chat = R"({"model":"m","messages":[{"role":"user","content":"x"}])";
  for (const auto& [kind, body] : std::vector<std::pair<ApiKind, std::string>>{
           {kChat, R"({"model":"m","messages":[{"role":"user","content":)" + arrays + "}]}"},
           {kC, R"({"model":"m","prompt":[)" + objects + "]}"},
           {kC, R"({"model":"m","prompt":"x","logit_bias":{"1":)" + arrays + "}}"},
           {kC, R"({"model":"m","prompt":"x","stop_token_ids":)" + arrays + "}"},
           {kC, R"({"model":"m","prompt":"x","user":)" + objects + "}"},
           {kC, R"({"model":"m","prompt":"x","no_such_field":)" + arrays + "}"},
           {kC, R"({"model":"m","prompt":"x","response_format":)" + objects + "}"},
           {kChat, chat + R"(,"tool_choice":)" + arrays + "}"},
           {kChat, chat + R"(,"tools":[)" + objects + "]}"},
           {kChat, chat + R"(,"chat_template_kwargs":{"x":)" + objects + "}}"},
           {kC, arrays},
       }) {
    SCOPED_TRACE(body.substr(0, 80));
    const absl::StatusOr<OpenAiRequest> parsed = Parse(kind, body);
    EXPECT_THAT(parsed, kTooDeep);
    EXPECT_EQ(ParamOf(parsed.status()), "");
  }
  // /tokenize and /detokenize.
  EXPECT_THAT(Tokenize(R"({"model":)" + arrays + "}", Tokenizer(), kLimits), kTooDeep);
  EXPECT_THAT(Tokenize(R"({"model":"m","messages":[{"role":"user","content":)" + objects + "}]}",
                       Tokenizer(), kLimits),
              kTooDeep);
  EXPECT_THAT(Detokenize(R"({"model":"m","tokens":)" + arrays + "}", Tokenizer(), kLimits),
              kTooDeep);
}

// The body itself is level 1: a field 63 levels deep is read (and refused for its
// type), one 64 levels deep is refused for the depth.
TEST(RequestBoundsTest, TheDepthLimitIs64Levels) {
  const std::string prefix = R"({"model":"m","prompt":"x","user":)";
  absl::StatusOr<OpenAiRequest> parsed = Parse(kC, prefix + Nested(63) + "}");
  EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("user must be")));
  EXPECT_EQ(ParamOf(parsed.status()), "user");
  EXPECT_THAT(Parse(kC, prefix + Nested(64) + "}"), kTooDeep);
  EXPECT_THAT(Tokenize(R"({"model":"m","prompt":"x","add_special_tokens":)" + Nested(63) + "}",
                       Tokenizer(), kLimits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("add_special_tokens")));
}

// At most 2^18 values plus max_prompt_tokens: a prompt of max_prompt_tokens ids always
// fits; a 16 MiB array of small numbers does not.
TEST(RequestBoundsTest, TheValuesABodyExpandsToAreBounded) {
  const RequestLimits big{.model = "m", .max_prompt_tokens = 300000, .vocab_size = 300};
  EXPECT_EQ(RequestJsonBounds(big).max_depth, 64);
  EXPECT_EQ(RequestJsonBounds(big).max_values, (int64_t{1} << 18) + 300000);
  std::string ids;
  for (int i = 0; i < 300000; ++i) absl::StrAppend(&ids, i == 0 ? "" : ",", "7");
  const std::string body = R"({"model":"m","prompt":[)" + ids + "]}";
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(kC, body, Tokenizer(), {}, RequestJsonBounds(big));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->request.prompt.size(), 300000u);
  // With the default max_prompt_tokens' bounds the same body is too large.
  EXPECT_THAT(Parse(kC, body), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("The request body is JSON with more than")));
  std::string zeros = R"({"model":"m","prompt":"x","user":[)";
  for (int i = 0; i < (8 << 20) - 64; ++i) zeros += "0,";
  zeros += "0]}";
  EXPECT_THAT(Parse(kC, zeros), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("The request body is JSON with more than")));
  EXPECT_THAT(Detokenize(zeros, Tokenizer(), kLimits),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than")));
}

std::string Ids(size_t n) {
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&out, i == 0 ? "" : ",", i % 300);
  return out + "]";
}

std::string Bias(size_t n) {
  std::string out = "{";
  for (size_t i = 0; i < n; ++i) absl::StrAppend(&out, i == 0 ? "" : ",", "\"", i, "\":1");
  return out + "}";
}

TEST(RequestBoundsTest, StopTokenIdsAndLogitBiasAreBounded) {
  const std::string prefix = R"({"model":"m","prompt":"x",)";
  absl::StatusOr<OpenAiRequest> parsed =
      Parse(kC, prefix + R"("stop_token_ids":)" + Ids(kMaxStopTokenIds) + "}");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->request.sampling.stop_token_ids.size(), kMaxStopTokenIds);
  parsed = Parse(kC, prefix + R"("stop_token_ids":)" + Ids(kMaxStopTokenIds + 1) + "}");
  EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("stop_token_ids may hold at most 1024 token ids, got "
                                         "1025")));
  EXPECT_EQ(ParamOf(parsed.status()), "stop_token_ids");

  parsed = Parse(kC, prefix + R"("logit_bias":)" + Bias(kMaxLogitBias) + "}");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->request.sampling.logit_bias.size(), kMaxLogitBias);
  parsed = Parse(kC, prefix + R"("logit_bias":)" + Bias(kMaxLogitBias + 1) + "}");
  EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("logit_bias may hold at most 1024 tokens, got 1025")));
  EXPECT_EQ(ParamOf(parsed.status()), "logit_bias");
}

struct OutOfRange {
  ApiKind kind;
  std::string fields;  // after "model" and "prompt"
  std::string param;
};

// 4294967297 is 2^32 + 1: truncated to int32 it was token 1.
TEST(RequestBoundsTest, IntegersOutsideTheirRangeAreRefusedNotTruncated) {
  for (const OutOfRange& c : std::vector<OutOfRange>{
           {kC, R"("stop_token_ids": [4294967297])", "stop_token_ids"},
           {kC, R"("stop_token_ids": [-2147483649])", "stop_token_ids"},
           {kC, R"("stop_token_ids": [18446744073709551615])", "stop_token_ids"},
           {kC, R"("seed": 18446744073709551616)", "seed"},
           {kC, R"("seed": -9223372036854775809)", "seed"},
           {kC, R"("logit_bias": {"4294967297": 1})", "logit_bias"},
           {kC, R"("max_tokens": 4294967297)", "max_tokens"},
           {kC, R"("min_tokens": 18446744073709551615)", "min_tokens"},
           {kC, R"("top_k": -4294967295)", "top_k"},
           {kChat, R"("top_logprobs": 18446744073709551615, "logprobs": true)", "top_logprobs"},
       }) {
    const std::string prefix = c.kind == kC
                                   ? R"({"model":"m","prompt":"x",)"
                                   : R"({"model":"m","messages":[{"role":"user","content":"x"}],)";
    const std::string body = prefix + c.fields + "}";
    SCOPED_TRACE(body);
    const absl::StatusOr<OpenAiRequest> parsed = Parse(c.kind, body);
    EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(ParamOf(parsed.status()), c.param);
  }
  for (const char* prompt : {"[4294967297]", "[18446744073709551615]", "[-2147483649]"}) {
    const absl::StatusOr<OpenAiRequest> parsed =
        Parse(kC, absl::StrCat(R"({"model":"m","prompt":)", prompt, "}"));
    EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("prompt token ids must be integers in the int32 range")))
        << prompt;
    EXPECT_EQ(ParamOf(parsed.status()), "prompt");
  }
  for (const char* tokens : {"[4294967297]", "[18446744073709551615]", "[-1]"}) {
    const absl::StatusOr<std::string> body =
        Detokenize(absl::StrCat(R"({"model":"m","tokens":)", tokens, "}"), Tokenizer(), kLimits);
    EXPECT_THAT(body, StatusIs(absl::StatusCode::kInvalidArgument)) << tokens;
    EXPECT_EQ(ParamOf(body.status()), "tokens") << tokens;
  }
  // The largest values in range are taken as they are.
  absl::StatusOr<OpenAiRequest> parsed =
      Parse(kC, R"({"model":"m","prompt":[2147483647],"seed":9223372036854775807,
                    "stop_token_ids":[2147483647]})");
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(parsed->request.prompt, ElementsAre(2147483647));
  EXPECT_EQ(parsed->request.sampling.seed, 9223372036854775807u);
  EXPECT_THAT(parsed->request.sampling.stop_token_ids, ElementsAre(2147483647));
}

// The sampler's seed is 64 bits: clients send it signed or unsigned, and both ends of
// both ranges are taken (a negative seed as its two's complement), never clamped.
TEST(RequestBoundsTest, SeedsTakeTheWholeSixtyFourBitRange) {
  for (const auto& [text, seed] : std::vector<std::pair<std::string, uint64_t>>{
           {"18446744073709551615", 18446744073709551615u},
           {"12267550562924977706", 12267550562924977706u},
           {"9223372036854775808", 9223372036854775808u},
           {"-1", 18446744073709551615u},
           {"-9223372036854775808", 9223372036854775808u},
           {"0", 0u},
       }) {
    const absl::StatusOr<OpenAiRequest> parsed =
        Parse(kC, absl::StrCat(R"({"model":"m","prompt":"x","seed":)", text, "}"));
    ASSERT_THAT(parsed, IsOk()) << text;
    EXPECT_EQ(parsed->request.sampling.seed, seed) << text;
    EXPECT_TRUE(parsed->has_seed) << text;
  }
}

}  // namespace
}  // namespace lockstep::router

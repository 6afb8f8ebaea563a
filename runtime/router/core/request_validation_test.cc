#include "runtime/router/core/request_validation.h"

#include <functional>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

const RequestLimits kLimits{.model = "tiny", .max_prompt_tokens = 8, .vocab_size = 300};

RouterRequest Valid() {
  RouterRequest request;
  request.model = "tiny";
  request.prompt = {'h', 'i'};
  request.sampling.max_tokens = 4;
  return request;
}

struct Bad {
  std::string label;
  std::function<void(RouterRequest&)> mutate;
  std::string param;
  std::string message;
};

class ValidationTest : public ::testing::TestWithParam<Bad> {};

TEST_P(ValidationTest, NamesTheParameter) {
  RouterRequest request = Valid();
  GetParam().mutate(request);
  const absl::Status status = ValidateRouterRequest(request, kLimits);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
  EXPECT_EQ(ParamOf(status), GetParam().param);
}

INSTANTIATE_TEST_SUITE_P(
    Requests, ValidationTest,
    ::testing::Values(
        Bad{"empty", [](auto& r) { r.prompt.clear(); }, "prompt", "The prompt is empty"},
        Bad{"too_long", [](auto& r) { r.prompt.assign(9, 'a'); }, "prompt",
            "The prompt has 9 tokens; the maximum is 8"},
        Bad{"token_range",
            [](auto& r) {
              r.prompt = {1, 300};
            },
            "prompt", "Prompt token 300 at position 1 is outside the vocabulary [0, 300)"},
        Bad{"max_tokens", [](auto& r) { r.sampling.max_tokens = 0; }, "max_tokens",
            "max_tokens must be >= 1, got 0"},
        Bad{"temperature", [](auto& r) { r.sampling.temperature = 3; }, "temperature",
            "temperature must be in [0, 2]"},
        Bad{"top_p", [](auto& r) { r.sampling.top_p = 0; }, "top_p", "top_p must be in (0, 1]"},
        Bad{"top_k", [](auto& r) { r.sampling.top_k = -1; }, "top_k", "top_k must be >= 0"},
        Bad{"logprobs", [](auto& r) { r.sampling.logprobs = 21; }, "logprobs",
            "logprobs must be in [0, 20]"},
        Bad{"stop_ids", [](auto& r) { r.sampling.stop_token_ids = {999}; }, "stop_token_ids",
            "token 999 is outside the vocabulary"},
        Bad{"stop_count",
            [](auto& r) {
              r.stop = {"a", "b", "c", "d", "e"};
            },
            "stop", "at most 4 sequences, got 5"},
        Bad{"stop_empty",
            [](auto& r) {
              r.stop = {"a", ""};
            },
            "stop", "stop[1] must be a non-empty string"},
        Bad{"presence", [](auto& r) { r.sampling.presence_penalty = 2.5f; }, "presence_penalty",
            "presence_penalty must be in [-2, 2]"},
        Bad{"frequency", [](auto& r) { r.sampling.frequency_penalty = -3; }, "frequency_penalty",
            "frequency_penalty must be in [-2, 2]"},
        Bad{"repetition", [](auto& r) { r.sampling.repetition_penalty = 0; }, "repetition_penalty",
            "repetition_penalty must be in (0, 2]"},
        Bad{"min_tokens", [](auto& r) { r.sampling.min_tokens = r.sampling.max_tokens + 1; },
            "min_tokens", "min_tokens must be in [0, max_tokens"},
        Bad{"bias_token",
            [](auto& r) {
              r.sampling.logit_bias = {{300, 1.0f}};
            },
            "logit_bias", "token 300 is outside the vocabulary"},
        Bad{"bias_value",
            [](auto& r) {
              r.sampling.logit_bias = {{3, 101.0f}};
            },
            "logit_bias", "must be in [-100, 100]"},
        // The bounds a worker request is sized for (config/message_limits.h), for both
        // APIs (RouterService.Generate has no parser of its own).
        Bad{"stop_ids_count",
            [](auto& r) { r.sampling.stop_token_ids.assign(kMaxStopTokenIds + 1, 7); },
            "stop_token_ids", "stop_token_ids may hold at most 1024 token ids, got 1025"},
        Bad{"bias_count",
            [](auto& r) {
              for (size_t i = 0; i <= kMaxLogitBias; ++i) {
                r.sampling.logit_bias.emplace_back(static_cast<int32_t>(i % 300), 1.0f);
              }
            },
            "logit_bias", "logit_bias may hold at most 1024 tokens, got 1025"},
        Bad{"grammar_text",
            [](auto& r) {
              r.sampling.grammar = grammar::GrammarSpec{grammar::GrammarSpec::Kind::kRegex, ""};
            },
            "grammar", "grammar: the schema, regex or EBNF text is empty"},
        Bad{"grammar_compile",
            [](auto& r) {
              r.sampling.grammar =
                  grammar::GrammarSpec{grammar::GrammarSpec::Kind::kRegex, "(ab"};
            },
            "grammar", "the grammar does not compile"}),
    [](const ::testing::TestParamInfo<Bad>& info) { return info.param.label; });

TEST(RequestValidationTest, AnUnknownModelIsNotFound) {
  RouterRequest request = Valid();
  request.model = "gpt-4";
  const absl::Status status = ValidateRouterRequest(request, kLimits);
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("The model 'gpt-4' does not exist")));
  EXPECT_EQ(ParamOf(status), "model");
  EXPECT_EQ(ErrorCodeOf(status), "model_not_found");
}

TEST(RequestValidationTest, AcceptsAValidRequestAndTagsCodes) {
  EXPECT_THAT(ValidateRouterRequest(Valid(), kLimits), IsOk());
  RouterRequest at_bounds = Valid();
  at_bounds.sampling.stop_token_ids.assign(kMaxStopTokenIds, 7);
  for (size_t i = 0; i < kMaxLogitBias; ++i) {
    at_bounds.sampling.logit_bias.emplace_back(static_cast<int32_t>(i % 300), 1.0f);
  }
  EXPECT_THAT(ValidateRouterRequest(at_bounds, kLimits), IsOk());
  RouterRequest request = Valid();
  request.model = "other";
  EXPECT_EQ(ErrorCodeOf(ValidateRouterRequest(request, kLimits)), "model_not_found");
  request = Valid();
  request.prompt.assign(20, 'a');
  EXPECT_EQ(ErrorCodeOf(ValidateRouterRequest(request, kLimits)), "context_length_exceeded");
  EXPECT_EQ(ParamOf(absl::InternalError("x")), "");
}

}  // namespace
}  // namespace lockstep::router

#include "runtime/router/http/request_fields.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr ApiKind kC = ApiKind::kCompletion;
constexpr ApiKind kChat = ApiKind::kChat;

absl::Status Check(ApiKind kind, const std::string& body) {
  return CheckOpenAiFields(kind, json::parse(body));
}

// Implemented fields and fields that change nothing pass (their types are the parser's).
TEST(RequestFieldsTest, ImplementedAndHarmlessFieldsPass) {
  EXPECT_THAT(Check(kC, R"({"model": "m", "prompt": "x", "max_tokens": 1, "echo": true,
      "best_of": 1, "logprobs": 2, "add_special_tokens": false, "stream_options":
      {"include_usage": true, "include_obfuscation": false}, "user": "u", "metadata": {"a": "b"},
      "store": false, "service_tier": "auto", "prompt_cache_key": "k",
      "safety_identifier": "s", "response_format": {"type": "json_object"}})"),
              IsOk());
  EXPECT_THAT(Check(kChat, R"({"model": "m", "messages": [], "max_completion_tokens": 1,
      "logprobs": true, "top_logprobs": 2, "add_generation_prompt": false,
      "chat_template_kwargs": {"enable_thinking": false}, "tools": [],
      "parallel_tool_calls": false, "tool_choice": "auto", "include_reasoning": false,
      "metadata": {}, "response_format": {"type": "json_schema", "json_schema": {"name": "n",
      "schema": {"type": "object"}}}})"),
              IsOk());
}

// Known fields that would change the output: refused, naming the field, unless they
// hold the value that changes nothing (or null).
TEST(RequestFieldsTest, UnsupportedFieldsAreRefusedUnlessTheyChangeNothing) {
  struct Case {
    ApiKind kind;
    std::string field;
    std::string no_op;  // "" when every value is refused
    std::string value;
  };
  const std::vector<Case> cases = {
      {kC, "suffix", R"("")", R"("s")"},
      {kC, "include_stop_str_in_output", "false", "true"},
      {kC, "skip_special_tokens", "true", "false"},
      {kC, "spaces_between_special_tokens", "true", "false"},
      {kChat, "function_call", R"("none")", R"("auto")"},
      {kChat, "functions", "[]", R"([{"name": "f"}])"},
      {kChat, "modalities", R"(["text"])", R"(["text", "audio"])"},
      {kChat, "continue_final_message", "false", "true"},
      {kChat, "echo", "false", "true"},
      {kChat, "documents", "", R"([{"text": "d"}])"},
      {kChat, "chat_template", "", R"("{{ messages }}")"},
      {kChat, "reasoning_effort", "", R"("low")"},
      {kChat, "verbosity", "", R"("low")"},
      {kChat, "audio", "", R"({"voice": "x"})"},
      {kChat, "prediction", "", R"({"type": "content"})"},
      {kChat, "web_search_options", "", "{}"},
      {kC, "min_p", "", "0.1"},
      {kChat, "guided_json", "", "{}"},
      {kC, "use_beam_search", "", "true"},
      {kC, "prompt_logprobs", "", "1"},
      {kChat, "return_tokens_as_token_ids", "", "true"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field + " = " + c.value);
    const std::string base = c.kind == kChat ? R"({"messages": [], )" : R"({"prompt": "x", )";
    const absl::Status refused = Check(c.kind, base + "\"" + c.field + "\": " + c.value + "}");
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not supported")));
    EXPECT_EQ(ParamOf(refused), c.field);
    EXPECT_THAT(Check(c.kind, base + "\"" + c.field + "\": null}"), IsOk());
    if (!c.no_op.empty()) {
      EXPECT_THAT(Check(c.kind, base + "\"" + c.field + "\": " + c.no_op + "}"), IsOk());
    }
  }
}

// Unknown fields, and fields of the other API, are refused naming them; null is absent.
TEST(RequestFieldsTest, UnknownFieldsAreRefused) {
  for (const auto& [kind, body, field] : std::vector<std::tuple<ApiKind, std::string, std::string>>{
           {kC, R"({"prompt": "x", "temprature": 0})", "temprature"},
           {kC, R"({"prompt": "x", "messages": []})", "messages"},
           {kC, R"({"prompt": "x", "max_completion_tokens": 1})", "max_completion_tokens"},
           {kC, R"({"prompt": "x", "tools": []})", "tools"},
           {kC, R"({"prompt": "x", "chat_template_kwargs": {}})", "chat_template_kwargs"},
           {kChat, R"({"messages": [], "prompt": "x"})", "prompt"},
           {kChat, R"({"messages": [], "best_of": 1})", "best_of"},
           {kChat, R"({"messages": [], "priority": 1})", "priority"},
           {kChat, R"({"messages": [], "stream_options": {"include_usage": true, "x": 1}})",
            "stream_options.x"},
       }) {
    const absl::Status status = Check(kind, body);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("Unrecognized request argument supplied: " + field)))
        << body;
    EXPECT_EQ(ParamOf(status), field) << body;
  }
  EXPECT_THAT(Check(kC, R"({"prompt": "x", "temprature": null})"), IsOk());
  EXPECT_THAT(Check(kC, R"({"prompt": "x", "stream_options": {"continuous_usage_stats": false}})"),
              IsOk());
  EXPECT_EQ(ParamOf(Check(kC, R"({"prompt": "x", "stream_options":
                                 {"continuous_usage_stats": true}})")),
            "stream_options.continuous_usage_stats");
}

TEST(RequestFieldsTest, KnownFieldsOfOtherEndpoints) {
  constexpr std::string_view kKnown[] = {"model", "tokens"};
  EXPECT_THAT(CheckKnownFields(json::parse(R"({"model": "m", "tokens": [1], "x": null})"), kKnown,
                               "/v1/detokenize"),
              IsOk());
  const absl::Status status =
      CheckKnownFields(json::parse(R"({"model": "m", "tokens": [1], "skip_special_tokens": true})"),
                       kKnown, "/v1/detokenize");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/v1/detokenize")));
  EXPECT_EQ(ParamOf(status), "skip_special_tokens");
}

}  // namespace
}  // namespace lockstep::router

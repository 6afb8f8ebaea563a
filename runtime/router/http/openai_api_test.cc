#include "runtime/router/http/openai_api.h"

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/text/sampling_defaults.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const ServingTokenizer& Tokenizer() {
  static const ServingTokenizer tokenizer(*tok::ByteTokenizer::Create(300, 256, 257));
  return tokenizer;
}

TEST(OpenAiApiTest, ParsesACompletionRequest) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      ApiKind::kCompletion,
      R"({"model": "tiny", "prompt": "hi", "max_tokens": 5, "temperature": 0, "top_p": 0.5,
          "top_k": 3, "seed": 42, "stream": true, "stream_options": {"include_usage": true},
          "logprobs": 2, "stop_token_ids": [257], "ignore_eos": true, "user": "u", "n": 1,
          "stop": null, "unknown_but_null": null})",
      Tokenizer());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->request.model, "tiny");
  EXPECT_THAT(parsed->request.prompt, ElementsAre('h', 'i'));
  const sched::SamplingParams& s = parsed->request.sampling;
  EXPECT_EQ(s.max_tokens, 5);
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.top_k, 3);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_TRUE(parsed->has_seed);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_THAT(s.stop_token_ids, ElementsAre(257));
  EXPECT_EQ(s.logprobs, 2);
  EXPECT_TRUE(parsed->stream);
  EXPECT_TRUE(parsed->include_usage);
  EXPECT_TRUE(parsed->want_logprobs);
}

TEST(OpenAiApiTest, PromptFormsAndDefaults) {
  auto parse = [](const std::string& body) {
    return ParseOpenAiRequest(ApiKind::kCompletion, body, Tokenizer());
  };
  EXPECT_THAT(parse(R"({"model": "m", "prompt": [1, 2, 3]})")->request.prompt,
              ElementsAre(1, 2, 3));
  EXPECT_THAT(parse(R"({"model": "m", "prompt": ["ab"]})")->request.prompt, ElementsAre('a', 'b'));
  const OpenAiRequest defaults = *parse(R"({"model": "m", "prompt": "x"})");
  EXPECT_EQ(defaults.request.sampling.max_tokens, 16);
  EXPECT_EQ(defaults.request.sampling.temperature, 1.0f);
  EXPECT_FALSE(defaults.has_seed);
  EXPECT_FALSE(defaults.stream);
  EXPECT_EQ(defaults.request.sampling.logprobs, 0);
}

TEST(OpenAiApiTest, TheModelsSamplingDefaultsApplyToOmittedFieldsOnly) {
  const SamplingDefaults model{
      .temperature = 0.6f, .top_p = 0.9f, .top_k = 20, .repetition_penalty = 1.1f};
  for (ApiKind kind : {ApiKind::kCompletion, ApiKind::kChat}) {
    const std::string input = kind == ApiKind::kChat
                                  ? R"("messages": [{"role": "user", "content": "x"}])"
                                  : R"("prompt": "x")";
    const sched::SamplingParams omitted =
        ParseOpenAiRequest(kind, R"({"model": "m", )" + input + "}", Tokenizer(), model)
            ->request.sampling;
    EXPECT_EQ(omitted.temperature, 0.6f);
    EXPECT_EQ(omitted.top_p, 0.9f);
    EXPECT_EQ(omitted.top_k, 20);
    EXPECT_EQ(omitted.repetition_penalty, 1.1f);

    const sched::SamplingParams given =
        ParseOpenAiRequest(kind,
                           R"({"model": "m", "temperature": 0, "top_p": 1, "top_k": 0,
                               "repetition_penalty": 1, )" +
                               input + "}",
                           Tokenizer(), model)
            ->request.sampling;
    EXPECT_EQ(given.temperature, 0.0f);
    EXPECT_EQ(given.top_p, 1.0f);
    EXPECT_EQ(given.top_k, 0);
    EXPECT_EQ(given.repetition_penalty, 1.0f);

    // JSON null is an omitted field.
    EXPECT_EQ(ParseOpenAiRequest(kind, R"({"model": "m", "temperature": null, )" + input + "}",
                                 Tokenizer(), model)
                  ->request.sampling.temperature,
              0.6f);
  }
  // A model that sets only some fields: the others keep the OpenAI defaults.
  const sched::SamplingParams partial =
      ParseOpenAiRequest(ApiKind::kCompletion, R"({"model": "m", "prompt": "x"})", Tokenizer(),
                         SamplingDefaults{.top_k = 5})
          ->request.sampling;
  EXPECT_EQ(partial.temperature, 1.0f);
  EXPECT_EQ(partial.top_p, 1.0f);
  EXPECT_EQ(partial.top_k, 5);
  EXPECT_EQ(partial.repetition_penalty, 1.0f);
}

TEST(OpenAiApiTest, ParsesAChatRequestThroughTheTemplate) {
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(ApiKind::kChat,
                         R"({"model": "m", "messages": [{"role": "user", "content": "Hi"},
          {"role": "user", "content": [{"type": "text", "text": "A"},
                                       {"type": "text", "text": "B"}]}],
          "max_completion_tokens": 3, "logprobs": true, "top_logprobs": 2})",
                         Tokenizer());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(Tokenizer().Decode(parsed->request.prompt),
            "<|user|>\nHi\n<|user|>\nAB\n<|assistant|>\n");
  EXPECT_EQ(parsed->request.sampling.max_tokens, 3);
  EXPECT_TRUE(parsed->want_logprobs);
  EXPECT_EQ(parsed->top_logprobs, 2);
  EXPECT_EQ(parsed->request.sampling.logprobs, 2);
}

struct BadBody {
  ApiKind kind;
  std::string body;
  std::string param;
  std::string message;
};

class BadBodyTest : public ::testing::TestWithParam<BadBody> {};

TEST_P(BadBodyTest, IsInvalidArgumentNamingTheParameter) {
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(GetParam().kind, GetParam().body, Tokenizer());
  EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
  EXPECT_EQ(ParamOf(parsed.status()), GetParam().param);
}

constexpr ApiKind kC = ApiKind::kCompletion;
constexpr ApiKind kChat = ApiKind::kChat;

INSTANTIATE_TEST_SUITE_P(
    Bodies, BadBodyTest,
    ::testing::Values(
        BadBody{kC, "{not json", "", "not valid JSON"},
        BadBody{kC, "[1]", "", "must be a JSON object"},
        BadBody{kC, R"({"prompt": "x"})", "model", "model is required"},
        BadBody{kC, R"({"model": 3, "prompt": "x"})", "model",
                "model must be a string, got number"},
        BadBody{kC, R"({"model": "m"})", "prompt", "prompt is required"},
        BadBody{kC, R"({"model": "m", "prompt": {"a": 1}})", "prompt", "prompt must be a string"},
        BadBody{kC, R"({"model": "m", "prompt": [1, "a"]})", "prompt", "only one prompt"},
        BadBody{kC, R"({"model": "m", "prompt": [1.5]})", "prompt", "must be integers"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "max_tokens": "5"})", "max_tokens",
                "max_tokens must be an integer, got string"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "max_tokens": 2.5})", "max_tokens",
                "max_tokens must be an integer, got number"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "max_tokens": 99999999999})", "max_tokens",
                "max_tokens must be in"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "temperature": "hot"})", "temperature",
                "temperature must be a number"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stream": 1})", "stream",
                "stream must be a boolean"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "n": 0})", "n", "n must be in [1, 128]"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "n": 129})", "n", "n must be in [1, 128]"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "logprobs": 30})", "logprobs",
                "logprobs must be in [0, 20]"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "echo": true, "logprobs": 1})", "echo",
                "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "echo": 1})", "echo",
                "echo must be a boolean"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", "stop",
                "at most 4 sequences, got 5"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stop": ["a", 1]})", "stop",
                "stop[1] must be a non-empty string"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stop": ["a", ""]})", "stop",
                "stop[1] must be a non-empty string"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stop": 3})", "stop",
                "stop must be a string or an array of strings"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "best_of": 3})", "best_of", "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "suffix": "s"})", "suffix", "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "min_p": 0.1})", "min_p", "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "guided_json": {}})", "guided_json",
                "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "use_beam_search": true})", "use_beam_search",
                "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "include_stop_str_in_output": true})",
                "include_stop_str_in_output", "not supported"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function"}]})",
                "tools", "tools[0].function must be an object"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "tool_choice": "auto"})",
                "tool_choice", "needs tools"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "response_format": {"type": "json_schema", "json_schema":
                               {"name": "x", "schema": {"type": "object", "not": {}}}}})",
                "response_format", "keyword 'not' is not supported"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "modalities": ["text", "audio"]})",
                "modalities", "not supported"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "reasoning_effort": "high"})",
                "reasoning_effort", "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "presence_penalty": "1"})", "presence_penalty",
                "presence_penalty must be a number"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "logit_bias": {"a": 1}})", "logit_bias",
                "logit_bias must map token ids to numbers"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "logit_bias": [1]})", "logit_bias",
                "logit_bias must be an object"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "min_tokens": -1})", "min_tokens",
                "min_tokens must be in"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stop_token_ids": [1, "a"]})",
                "stop_token_ids", "must be an array of integers"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "seed": "s"})", "seed",
                "seed must be an integer"},
        BadBody{kChat, R"({"model": "m"})", "messages", "messages is required"},
        BadBody{kChat, R"({"model": "m", "messages": "hi"})", "messages", "must be an array"},
        BadBody{kChat, R"({"model": "m", "messages": []})", "messages", "must not be empty"},
        BadBody{kChat, R"({"model": "m", "messages": [{"content": "x"}]})", "messages",
                "messages[0] must be an object with a string role"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})",
                "messages", "messages[0].content must be a string"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})",
                "messages", "got 'robot'"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "logprobs": 1})",
                "logprobs", "logprobs must be a boolean"},
        // request_fields.h: unknown fields, and fields of the other API, are refused.
        BadBody{kC, R"({"model": "m", "prompt": "x", "temprature": 0})", "temprature",
                "Unrecognized request argument supplied: temprature"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "top_logprobs": 2})", "top_logprobs",
                "Unrecognized request argument"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "best_of": 1})",
                "best_of", "Unrecognized request argument"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true,
                        "continuous_usage_stats": true}})",
                "stream_options.continuous_usage_stats", "not supported"},
        BadBody{kC, R"({"model": "m", "prompt": "x", "add_special_tokens": 1})",
                "add_special_tokens", "add_special_tokens must be a boolean"},
        // Chat options: chat_prompt.h.
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "chat_template_kwargs": [1]})",
                "chat_template_kwargs", "chat_template_kwargs must be an object"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "chat_template_kwargs": {"add_generation_prompt": false}})",
                "chat_template_kwargs", "may not set 'add_generation_prompt'"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "add_generation_prompt": "no"})",
                "add_generation_prompt", "add_generation_prompt must be a boolean"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function", "function": {"name": "f"}}],
                           "tool_choice": "none"})",
                "tools", "tools need the model's chat template"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "continue_final_message": true})",
                "continue_final_message", "not supported"},
        BadBody{kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                           "chat_template": "{{ messages }}"})",
                "chat_template", "not supported"}));

// Splits an SSE stream into the JSON payloads of its data events ([DONE] kept as is).
std::vector<std::string> Events(const std::string& stream) {
  std::vector<std::string> events;
  size_t pos = 0;
  while ((pos = stream.find("data: ", pos)) != std::string::npos) {
    const size_t end = stream.find("\n\n", pos);
    events.push_back(stream.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return events;
}

TEST(OpenAiApiTest, ParsesStopStringsNChoicesAndEcho) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      kC, R"({"model": "m", "prompt": "x", "stop": "\n\n", "n": 3, "best_of": 3, "echo": true,
              "suffix": ""})",
      Tokenizer());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(parsed->request.stop, ElementsAre("\n\n"));
  EXPECT_EQ(parsed->n, 3);
  EXPECT_TRUE(parsed->echo);
  parsed =
      ParseOpenAiRequest(kChat, R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                 "stop": ["a", "bc", "d", "e"], "response_format": {"type": "text"},
                 "modalities": ["text"], "parallel_tool_calls": true, "tools": [],
                 "tool_choice": "none"})",
                         Tokenizer());
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(parsed->request.stop, ElementsAre("a", "bc", "d", "e"));
  EXPECT_EQ(parsed->n, 1);
}

TEST(OpenAiApiTest, ParsesPenaltiesMinTokensAndLogitBias) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(
      kC, R"({"model": "m", "prompt": "x", "presence_penalty": 0.5, "frequency_penalty": -1,
              "repetition_penalty": 1.2, "min_tokens": 3, "logit_bias": {"65": -100, "7": 2.5}})",
      Tokenizer());
  ASSERT_THAT(parsed, IsOk());
  const sched::SamplingParams& s = parsed->request.sampling;
  EXPECT_EQ(s.presence_penalty, 0.5f);
  EXPECT_EQ(s.frequency_penalty, -1.0f);
  EXPECT_EQ(s.repetition_penalty, 1.2f);
  EXPECT_EQ(s.min_tokens, 3);
  EXPECT_THAT(s.logit_bias, ElementsAre(std::pair<int32_t, float>{7, 2.5f},
                                        std::pair<int32_t, float>{65, -100.0f}));
  EXPECT_TRUE(s.UsesHistory());
}

TEST(OpenAiApiTest, ChoiceSeedsDiffer) {
  EXPECT_EQ(ChoiceSeed(42, 0), 42u);
  EXPECT_NE(ChoiceSeed(42, 1), 42u);
  EXPECT_NE(ChoiceSeed(42, 1), ChoiceSeed(42, 2));
  EXPECT_NE(ChoiceSeed(42, 1), ChoiceSeed(43, 1));
}

TEST(OpenAiApiTest, StopStringEndsTheTextAndIsNotReturned) {
  OpenAiRequest request = *ParseOpenAiRequest(
      kC, R"({"model": "m", "prompt": "x", "stream": true, "stop": ["!!"]})", Tokenizer());
  OpenAiResponseWriter writer(request, "cmpl-1", 1, Tokenizer());
  std::string stream = writer.StreamEvent({{'h', 'i', '!'}, {}});
  EXPECT_FALSE(writer.stopped());
  stream += writer.StreamEvent({{'!', 'x'}, {}});
  EXPECT_TRUE(writer.stopped());
  RequestResult result;
  result.finish_reason = v1::FINISH_REASON_STOP;
  stream += writer.StreamEnd(result);
  const std::vector<std::string> events = Events(stream);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "hi");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["text"], "");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(events[2], "[DONE]");
}

TEST(OpenAiApiTest, EchoAndSeveralChoicesInOneBody) {
  OpenAiRequest request = *ParseOpenAiRequest(
      kC, R"({"model": "m", "prompt": "Q:", "echo": true, "n": 2})", Tokenizer());
  std::vector<json> choices;
  std::vector<RequestResult> results(2);
  for (int i = 0; i < 2; ++i) {
    OpenAiResponseWriter writer(request, "cmpl-3", 1, Tokenizer(), i);
    writer.Append({{static_cast<int32_t>('a' + i)}, {}});
    results[i].finish_reason = v1::FINISH_REASON_LENGTH;
    results[i].prompt_tokens = 2;
    results[i].cached_prompt_tokens = 1 - i;
    results[i].completion_tokens = 1 + i;
    choices.push_back(writer.FinishedChoice(results[i]));
  }
  OpenAiResponseWriter any(request, "cmpl-3", 1, Tokenizer());
  const json body = json::parse(any.Body(choices, results));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], "Q:a");
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["text"], "Q:b");
  // The prompt counts once, with the first choice's cached tokens; completions add up.
  EXPECT_EQ(body["usage"], (json{{"prompt_tokens", 2},
                                 {"completion_tokens", 3},
                                 {"total_tokens", 5},
                                 {"prompt_tokens_details", {{"cached_tokens", 1}}}}));
}

TEST(OpenAiApiTest, ErrorBodyIsOpenAiShaped) {
  const absl::Status status = InvalidParam("max_tokens", "max_tokens must be >= 1, got 0");
  EXPECT_EQ(HttpStatusOf(status), 400);
  const json body = json::parse(ErrorBody(status));
  EXPECT_EQ(body["error"]["message"], "max_tokens must be >= 1, got 0");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "max_tokens");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_EQ(HttpStatusOf(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusOf(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(HttpStatusOf(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(json::parse(ErrorBody(absl::UnauthenticatedError("x")))["error"]["type"],
            "authentication_error");
  EXPECT_THAT(ErrorEvent(status), ::testing::EndsWith("\n\ndata: [DONE]\n\n"));
}

TEST(OpenAiApiTest, StreamingCompletionNeverSplitsACharacter) {
  OpenAiRequest request = *ParseOpenAiRequest(
      kC,
      R"({"model": "m", "prompt": "x", "stream": true, "stream_options": {"include_usage": true}})",
      Tokenizer());
  OpenAiResponseWriter writer(request, "cmpl-1", 100, Tokenizer());
  std::string stream;
  // "é" = C3 A9 arrives split over two deltas; 257 (EOS) decodes to nothing.
  for (std::vector<int32_t> ids : {std::vector<int32_t>{'o', 0xC3}, {0xA9}, {257}}) {
    stream += writer.StreamEvent({ids, {}});
  }
  RequestResult result;
  result.finish_reason = v1::FINISH_REASON_STOP;
  result.prompt_tokens = 1;
  result.completion_tokens = 4;
  stream += writer.StreamEnd(result);
  const std::vector<std::string> events = Events(stream);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], "o");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["text"], "\xC3\xA9");
  const json last = json::parse(events[2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["object"], "text_completion");
  EXPECT_EQ(last["id"], "cmpl-1");
  EXPECT_EQ(json::parse(events[3])["usage"]["total_tokens"], 5);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(OpenAiApiTest, ChatBodyAndChunks) {
  OpenAiRequest request = *ParseOpenAiRequest(
      kChat, R"({"model": "m", "messages": [{"role": "user", "content": "q"}], "logprobs": true,
                 "top_logprobs": 1})",
      Tokenizer());
  RequestResult result;
  result.finish_reason = v1::FINISH_REASON_LENGTH;
  result.completion_tokens = 2;
  v1::TokenLogprobs lp;
  lp.set_token_id('o');
  lp.set_logprob(-0.25f);
  lp.add_top()->set_token_id('o');
  lp.add_top()->set_token_id('p');  // beyond top_logprobs = 1: dropped

  OpenAiResponseWriter whole(request, "chatcmpl-9", 5, Tokenizer());
  whole.Append({{'o'}, {lp}});
  lp.set_token_id('k');
  whole.Append({{'k'}, {lp}});
  const json body = json::parse(whole.Body(result));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "ok");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  ASSERT_EQ(body["choices"][0]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][1]["token"], "k");
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["logprob"], -0.25);
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 1u);
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);

  OpenAiResponseWriter chunks(request, "chatcmpl-9", 5, Tokenizer());
  const std::vector<std::string> events = Events(chunks.StreamEvent({{'o'}, {lp}}));
  ASSERT_EQ(events.size(), 1u);
  const json chunk = json::parse(events[0]);
  EXPECT_EQ(chunk["object"], "chat.completion.chunk");
  EXPECT_EQ(chunk["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "o");
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
}

TEST(OpenAiApiTest, CompletionLogprobsUseByteTokenNames) {
  OpenAiRequest request =
      *ParseOpenAiRequest(kC, R"({"model": "m", "prompt": "x", "logprobs": 1})", Tokenizer());
  OpenAiResponseWriter writer(request, "cmpl-2", 5, Tokenizer());
  std::vector<v1::TokenLogprobs> lps(2);
  lps[0].set_token_id('a');
  lps[1].set_token_id(0xE2);
  writer.Append({{'a', 0xE2}, lps});
  const json body = json::parse(writer.Body(RequestResult()));
  const json& logprobs = body["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"][0], "a");
  EXPECT_EQ(logprobs["tokens"][1], "bytes:\\xe2");
  EXPECT_EQ(logprobs["text_offset"][1], 1);
  // The unfinished character is replaced at the end, never emitted as invalid UTF-8.
  EXPECT_EQ(body["choices"][0]["text"], "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace lockstep::router

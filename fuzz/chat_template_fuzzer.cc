// The chat-template renderer (tokenizer/chat_template.h and its Jinja interpreter) on
// fuzzed templates and contexts. The input is the template source, a NUL byte, and a
// JSON context: {"messages": ..., "tools": ..., "add_generation_prompt": ..., and any
// other key as an extra template variable}; a missing or unparsable context is one user
// turn. Loading and rendering each return a result or an error with a message; nothing
// crashes, whatever the template or the messages. The context is mutated as JSON
// (json_mutator.h: deep and wide values) as well as bytewise, and parsed without the
// router's depth bound, so values deeper than Value::FromJson's limit reach it (the
// harness moves them, never copies).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/bounded_json.h"
#include "fuzz/json_mutator.h"
#include "nlohmann/json.hpp"
#include "tokenizer/chat_template.h"

namespace {

using Json = nlohmann::ordered_json;

// Longer templates only slow the search down; contexts may be long (deep values).
constexpr size_t kMaxSource = 64 << 10;
constexpr size_t kMaxInput = 1 << 20;
constexpr size_t kMaxExtraVariables = 256;

const Json& DefaultMessages() {
  static const auto* messages =
      new Json(Json::array({{{"role", "user"}, {"content", "Hello"}}}));
  return *messages;
}

}  // namespace

// The context after the NUL is mutated as JSON; an input without one bytewise.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return LLVMFuzzerMutate(data, size, max_size);
  return lockstep::fuzz::MutateJsonInput(data, size, max_size, seed, nul + 1);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  if (source.size() > kMaxSource) return 0;
  Json context;
  if (nul != std::string_view::npos) {
    absl::StatusOr<Json> parsed = lockstep::ParseBoundedJson<Json>(
        input.substr(nul + 1), {.max_depth = 1 << 20, .max_values = 1 << 20});
    if (parsed.ok()) context = *std::move(parsed);
  }
  if (!context.is_object()) context = Json::object();

  absl::StatusOr<lockstep::tok::ChatTemplate> chat = lockstep::tok::ChatTemplate::FromSource(
      source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  if (!chat.ok()) {
    if (chat.status().message().empty()) std::abort();  // errors say what is wrong
    return 0;
  }
  Json messages = DefaultMessages();
  Json tools = nullptr;
  bool add_generation_prompt = true;
  // The context's other keys are the extra variables (keys are unique once parsed).
  if (const auto it = context.find("messages"); it != context.end()) {
    messages = std::move(*it);
    context.erase(it);
  }
  if (const auto it = context.find("tools"); it != context.end()) {
    tools = std::move(*it);
    context.erase(it);
  }
  if (const auto it = context.find("add_generation_prompt"); it != context.end()) {
    if (it->is_boolean()) add_generation_prompt = it->get<bool>();
    context.erase(it);
  }
  // As many extra variables as the router lets through (chat_template_kwargs).
  if (context.size() > kMaxExtraVariables) return 0;
  absl::StatusOr<std::string> prompt =
      chat->Render(messages, tools, add_generation_prompt, context);
  if (!prompt.ok() && prompt.status().message().empty()) std::abort();
  return 0;
}

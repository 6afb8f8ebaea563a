// The chat-template renderer (tokenizer/chat_template.h and its Jinja interpreter) on
// fuzzed templates and contexts. The input is the template source, a NUL byte, and a
// JSON context: {"messages": ..., "tools": ..., "add_generation_prompt": ..., and any
// other key as an extra template variable}; a missing or unparsable context is one user
// turn. Loading and rendering each return a result or an error with a message; nothing
// crashes, whatever the template or the messages.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/chat_template.h"

namespace {

using Json = nlohmann::ordered_json;

// Longer inputs only slow the search down.
constexpr size_t kMaxInput = 64 << 10;

const Json& DefaultMessages() {
  static const auto* messages =
      new Json(Json::array({{{"role", "user"}, {"content", "Hello"}}}));
  return *messages;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  Json context = nul == std::string_view::npos
                     ? Json()
                     : Json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
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
  Json extra = Json::object();
  for (auto& [key, value] : context.items()) {
    if (key == "messages") {
      messages = value;
    } else if (key == "tools") {
      tools = value;
    } else if (key == "add_generation_prompt" && value.is_boolean()) {
      add_generation_prompt = value.get<bool>();
    } else {
      extra[key] = value;
    }
  }
  absl::StatusOr<std::string> prompt =
      chat->Render(messages, tools, add_generation_prompt, extra);
  if (!prompt.ok() && prompt.status().message().empty()) std::abort();
  return 0;
}

#include "runtime/router/tool_calls/template_messages.h"

#include <string>

namespace lockstep::router::tool_calls {

using Json = nlohmann::ordered_json;

Json MessagesForTemplate(ToolFormat format, Json messages) {
  if (!messages.is_array()) return messages;
  const bool string_arguments = format == ToolFormat::kDeepSeekV3;
  for (Json& message : messages) {
    if (!message.is_object()) continue;
    const auto calls = message.find("tool_calls");
    if (calls == message.end() || !calls->is_array() || calls->empty()) continue;
    const auto content = message.find("content");
    if (string_arguments) {
      if (content != message.end() && content->is_string() &&
          content->get_ref<const std::string&>().empty()) {
        *content = nullptr;
      }
    } else if (content == message.end() || content->is_null()) {
      message["content"] = "";
    }
    for (Json& call : *calls) {
      if (!call.is_object()) continue;
      const auto function = call.find("function");
      if (function == call.end() || !function->is_object()) continue;
      const auto arguments = function->find("arguments");
      if (arguments == function->end()) continue;
      if (string_arguments && !arguments->is_string()) {
        *arguments = arguments->dump();
      } else if (!string_arguments && arguments->is_string()) {
        Json parsed = Json::parse(arguments->get_ref<const std::string&>(), nullptr,
                                  /*allow_exceptions=*/false);
        if (!parsed.is_discarded()) *arguments = std::move(parsed);
      }
    }
  }
  return messages;
}

}  // namespace lockstep::router::tool_calls

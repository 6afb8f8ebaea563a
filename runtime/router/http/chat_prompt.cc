#include "runtime/router/http/chat_prompt.h"

#include <string>
#include <utility>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/http/chat_template.h"
#include "runtime/router/tool_calls/parser_family.h"
#include "runtime/router/tool_calls/template_messages.h"

namespace lockstep::router {
namespace {

using Json = nlohmann::ordered_json;

// The fixed template's messages: role and text content.
absl::StatusOr<std::vector<ChatMessage>> FixedTemplateMessages(const Json& messages) {
  if (!messages.is_array()) {
    return InvalidParam("messages",
                        fmt::format("messages must be an array, got {}", messages.type_name()));
  }
  std::vector<ChatMessage> parsed;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return InvalidParam("messages",
                          fmt::format("messages[{}] must be an object with a string role", i));
    }
    ChatMessage message{m["role"].get<std::string>(), ""};
    // Read in place, without copying the client's values (find() is end() on a value
    // that is not an object).
    const auto content = m.find("content");
    const bool has_content = content != m.end() && !content->is_null();
    if (has_content && content->is_string()) {
      message.content = content->get<std::string>();
    } else if (has_content && content->is_array()) {
      for (const Json& part : *content) {
        const auto type = part.find("type");
        const auto part_text = part.find("text");
        if (type == part.end() || *type != "text" || part_text == part.end() ||
            !part_text->is_string()) {
          return InvalidParam("messages", fmt::format("messages[{}].content parts must be "
                                                      "{{\"type\": \"text\", \"text\": ...}}",
                                                      i));
        }
        message.content += part_text->get<std::string>();
      }
    } else if (has_content) {
      return InvalidParam("messages", fmt::format("messages[{}].content must be a string or an "
                                                  "array of text parts, got {}",
                                                  i, content->type_name()));
    }
    parsed.push_back(std::move(message));
  }
  return parsed;
}

}  // namespace

absl::StatusOr<ChatPromptOptions> ParseChatPromptOptions(const Json& body) {
  ChatPromptOptions options;
  ASSIGN_OR_RETURN(options.add_generation_prompt,
                   OptionalBool(body, "add_generation_prompt", true));
  ASSIGN_OR_RETURN(options.add_special_tokens, OptionalBool(body, "add_special_tokens", false));
  if (const auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      return InvalidParam(
          "chat_template_kwargs",
          fmt::format("chat_template_kwargs must be an object, got {}", it->type_name()));
    }
    // Each is set in the template's variables by a linear search (jinja::Dict).
    if (it->size() > kMaxChatTemplateKwargs) {
      return InvalidParam("chat_template_kwargs",
                          fmt::format("chat_template_kwargs may hold at most {} variables, got {}",
                                      kMaxChatTemplateKwargs, it->size()));
    }
    for (const char* reserved : {"messages", "tools", "documents", "add_generation_prompt"}) {
      if (it->contains(reserved)) {
        return InvalidParam("chat_template_kwargs",
                            fmt::format("chat_template_kwargs may not set '{}' (the request "
                                        "sets it)",
                                        reserved));
      }
    }
    options.template_kwargs = *it;
  }
  if (const auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) {
      return InvalidParam("tools", fmt::format("tools must be an array, got {}", it->type_name()));
    }
    if (!it->empty()) options.tools = *it;
  }
  return options;
}

absl::StatusOr<std::vector<int32_t>> EncodeChatPrompt(const Json& messages,
                                                      const ServingTokenizer& tokenizer,
                                                      const ChatPromptOptions& options,
                                                      std::string* rendered_text) {
  std::string text;
  if (const tok::ChatTemplate* chat = tokenizer.chat_template()) {
    if (!messages.is_array() || messages.empty()) {
      return InvalidParam("messages", "messages must be a non-empty array");
    }
    for (size_t i = 0; i < messages.size(); ++i) {
      const auto role = messages[i].find("role");
      if (role == messages[i].end() || !role->is_string()) {
        return InvalidParam("messages",
                            fmt::format("messages[{}] must be an object with a string role", i));
      }
    }
    const tool_calls::ToolFormat format = tool_calls::DetectParserFamily(chat->source()).tools;
    absl::StatusOr<std::string> rendered =
        chat->Render(tool_calls::MessagesForTemplate(format, messages), options.tools,
                     options.add_generation_prompt, options.template_kwargs);
    if (!rendered.ok()) {
      return InvalidParam("messages", fmt::format("the model's chat template failed: {}",
                                                  std::string(rendered.status().message())));
    }
    text = *std::move(rendered);
  } else {
    if (!options.tools.is_null()) {
      return InvalidParam("tools", "tools need the model's chat template (this model has none)");
    }
    ASSIGN_OR_RETURN(const std::vector<ChatMessage> parsed, FixedTemplateMessages(messages));
    ASSIGN_OR_RETURN(text, RenderChatPrompt(parsed, options.add_generation_prompt));
  }
  // The template writes the special tokens it wants; the tokenizer's only when asked.
  std::vector<int32_t> ids = tokenizer.Encode(text, options.add_special_tokens);
  if (rendered_text != nullptr) *rendered_text = std::move(text);
  return ids;
}

}  // namespace lockstep::router

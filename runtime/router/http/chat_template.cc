#include "runtime/router/http/chat_template.h"

#include "fmt/format.h"
#include "runtime/router/core/request_validation.h"

namespace lockstep::router {

absl::StatusOr<std::string> RenderChatPrompt(const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt) {
  if (messages.empty()) return InvalidParam("messages", "messages must not be empty");
  std::string prompt;
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string role = messages[i].role;
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      return InvalidParam("messages", fmt::format("messages[{}].role must be system, developer, "
                                                  "user or assistant, got '{}'",
                                                  i, messages[i].role));
    }
    prompt += fmt::format("<|{}|>\n{}\n", role, messages[i].content);
  }
  if (add_generation_prompt) prompt += "<|assistant|>\n";
  return prompt;
}

}  // namespace lockstep::router

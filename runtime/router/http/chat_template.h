// The chat template of Lockstep's byte-level models, which have no special chat
// tokens. Each message becomes a role header line and its content; the prompt ends
// with the assistant header (unless add_generation_prompt is false), so the model
// continues as the assistant:
//
//   <|system|>\n{content}\n<|user|>\n{content}\n<|assistant|>\n{content}\n ... <|assistant|>\n
//
// Roles: system, developer (rendered as system), user, assistant.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_CHAT_TEMPLATE_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_CHAT_TEMPLATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::router {

struct ChatMessage {
  std::string role;
  std::string content;
};

// The prompt text for `messages`; INVALID_ARGUMENT (param "messages") when the list is
// empty or a role is unknown.
absl::StatusOr<std::string> RenderChatPrompt(const std::vector<ChatMessage>& messages,
                                             bool add_generation_prompt = true);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_CHAT_TEMPLATE_H_

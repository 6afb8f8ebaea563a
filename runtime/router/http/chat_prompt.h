// How a chat request's messages become its prompt's token ids, for
// /v1/chat/completions and /v1/tokenize with messages: the model's chat template
// (tokenizer_config.json) when it has one, rendered as transformers' apply_chat_template
// renders it, else chat_template.h's fixed template; then the tokenizer.
//
// The request's chat options:
//   add_generation_prompt  bool, default true: end the prompt with the assistant's
//                          header (the template's `add_generation_prompt`).
//   add_special_tokens     bool, default false: also add the tokenizer's special tokens
//                          (e.g. BOS) when encoding the rendered text; the template
//                          usually writes them itself.
//   chat_template_kwargs   an object: extra template variables, e.g.
//                          {"enable_thinking": false} for Qwen 3; they override the
//                          special tokens, as in transformers. Variables a template
//                          does not use change nothing (as in transformers and vLLM);
//                          the fixed template uses none. The names the template gets
//                          from the request (messages, tools, documents,
//                          add_generation_prompt) are refused, and so are more than
//                          kMaxChatTemplateKwargs (256) variables.
//   tools                  a list of tool definitions the template renders (the
//                          caller decides when tools are allowed); the fixed template
//                          has no place for them, so they are refused there.
//
// Errors are INVALID_ARGUMENT naming the field. Messages are kept as
// nlohmann::ordered_json so that tool-call arguments reach the template in the
// client's key order, as in Python. Thread-safe (pure functions).
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_CHAT_PROMPT_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_CHAT_PROMPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/router/text/serving_tokenizer.h"

namespace lockstep::router {

inline constexpr size_t kMaxChatTemplateKwargs = 256;

struct ChatPromptOptions {
  bool add_generation_prompt = true;
  bool add_special_tokens = false;
  nlohmann::ordered_json template_kwargs;  // an object, or null for none
  nlohmann::ordered_json tools;            // a non-empty list, or null for none
};

// The chat options of a request `body` (an object).
absl::StatusOr<ChatPromptOptions> ParseChatPromptOptions(const nlohmann::ordered_json& body);

// The prompt ids of `messages`; INVALID_ARGUMENT naming "messages" when they are
// malformed or the template fails on them (raise_exception and the like). With the
// model's template, assistant tool calls and their content are first put in the form
// the template's family expects (tool_calls/template_messages.h). `rendered_text`, when
// given, receives the prompt's text.
absl::StatusOr<std::vector<int32_t>> EncodeChatPrompt(const nlohmann::ordered_json& messages,
                                                      const ServingTokenizer& tokenizer,
                                                      const ChatPromptOptions& options = {},
                                                      std::string* rendered_text = nullptr);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_CHAT_PROMPT_H_

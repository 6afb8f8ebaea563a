// Test-only: seeded random chat requests (messages, tools, add_generation_prompt, extra
// template variables) for the chat-template tests, shaped by what a template supports.
#ifndef LOCKSTEP_TOKENIZER_TESTING_CONVERSATIONS_H_
#define LOCKSTEP_TOKENIZER_TESTING_CONVERSATIONS_H_

#include <cstdint>
#include <vector>

#include "nlohmann/json.hpp"

namespace lockstep::tok::testing {

// What the generated conversations may contain.
struct ConversationProfile {
  bool mid_system = false;        // system messages after the first message too
  bool tools = false;             // tool definitions in the request
  bool tool_calls = false;        // assistant tool calls followed by tool results
  bool string_arguments = false;  // tool-call arguments always as JSON text
  bool null_call_content = false; // assistant messages with tool calls have null content
  bool content_parts = false;     // content sometimes a list of {"type": "text"/"image"}
  bool reasoning = false;         // reasoning_content, <think> text, enable_thinking
  double break_alternation = 0.05;  // chance of two user messages in a row
};

struct ChatRequest {
  nlohmann::ordered_json messages;  // a list
  nlohmann::ordered_json tools;     // a list or null
  bool add_generation_prompt = false;
  nlohmann::ordered_json extra;     // an object
};

std::vector<ChatRequest> GenerateConversations(uint64_t seed, const ConversationProfile& profile,
                                               int count);

}  // namespace lockstep::tok::testing

#endif  // LOCKSTEP_TOKENIZER_TESTING_CONVERSATIONS_H_

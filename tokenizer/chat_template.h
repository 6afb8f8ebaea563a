// A model's chat template: the Jinja `chat_template` of a Hugging Face
// tokenizer_config.json, rendered the way Hugging Face `transformers` renders it
// (apply_chat_template: jinja2's ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, its raise_exception, tojson and strftime_now, the loop-controls
// extension and the `generation` tag) by Lockstep's own Jinja interpreter (jinja/).
//
//   ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::FromTokenizerConfigFile(
//                                           dir + "/tokenizer_config.json"));
//   ASSIGN_OR_RETURN(std::string prompt,
//                    chat.Render(request["messages"], request.value("tools", json()),
//                                /*add_generation_prompt=*/true));
//
// A template that uses a construct the interpreter does not support (a tag, filter, test,
// method or global it does not know) fails at load with the construct and its line;
// rendering fails only where jinja2 would too (raise_exception, an undefined value used
// in arithmetic, a type error, ...), with jinja2's message where it has one.
//
// JSON objects keep their key order (nlohmann::ordered_json): tool schemas and tool-call
// arguments reach the prompt in the client's order, as in Python. Passing a
// nlohmann::json (whose keys are sorted) works but sorts them.
//
// Immutable after loading; Render is thread-safe. Copies share the parsed template.
#ifndef LOCKSTEP_TOKENIZER_CHAT_TEMPLATE_H_
#define LOCKSTEP_TOKENIZER_CHAT_TEMPLATE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {

namespace jinja {
class Template;
}  // namespace jinja

class ChatTemplate {
 public:
  // From a parsed tokenizer_config.json. `chat_template` may be a string or a list of
  // {"name", "template"} (then `name` picks one, "default" by default). The special
  // tokens (bos_token, eos_token, unk_token, pad_token, ..., additional_special_tokens,
  // extra_special_tokens; strings or AddedToken objects) become template variables as in
  // transformers' special_tokens_map. NotFound when the config has no chat template.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfig(const nlohmann::ordered_json& config,
                                                          std::string_view name = "default");
  static absl::StatusOr<ChatTemplate> FromTokenizerConfigFile(const std::string& path,
                                                              std::string_view name = "default");

  // A template given as source text, with `special_tokens` as its extra variables
  // (e.g. {"bos_token": "<s>", "eos_token": "</s>"}).
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source,
                                                 nlohmann::ordered_json special_tokens = {});

  // The prompt for `messages` (a list of {"role", "content", optional "tool_calls",
  // "tool_call_id", "name", "reasoning_content", ...}; content a string, null or a list
  // of parts), `tools` (a list of tool definitions, or null for none) and
  // `add_generation_prompt`. `extra_context` (an object or null) adds template variables
  // such as "enable_thinking"; they override the special tokens, as in transformers.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& messages,
                                     const nlohmann::ordered_json& tools,
                                     bool add_generation_prompt,
                                     const nlohmann::ordered_json& extra_context = nullptr) const;

  const std::string& source() const { return source_; }
  // The config's bos_token and eos_token ("" when it has none).
  const std::string& bos_token() const { return bos_token_; }
  const std::string& eos_token() const { return eos_token_; }

 private:
  ChatTemplate() = default;

  std::string source_;
  std::string bos_token_;
  std::string eos_token_;
  nlohmann::ordered_json special_tokens_;           // variables before the caller's
  std::shared_ptr<const jinja::Template> template_;  // never null once loaded
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_CHAT_TEMPLATE_H_

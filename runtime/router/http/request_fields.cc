#include "runtime/router/http/request_fields.h"

#include <algorithm>
#include <string>

#include "fmt/format.h"
#include "runtime/router/core/request_validation.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

enum Apis : uint8_t { kCompletions = 1, kChats = 2, kBoth = 3 };

enum class Use {
  kImplemented,  // parsed by the API
  kIgnored,      // accepted; it does not change the output
  kUnsupported,  // changes the output: only `no_op` (if any) is accepted
};

struct Field {
  std::string_view name;
  uint8_t apis;
  Use use;
  const char* no_op = nullptr;  // kUnsupported: the JSON of the value that changes nothing
  const char* why = "";         // kUnsupported: appended to "... is not supported"
};

constexpr char kLegacyFunctions[] = " (use tools and tool_choice)";

// OpenAI's fields (https://platform.openai.com/docs/api-reference) and the vLLM
// extensions clients send; see request_fields.h for the classes.
constexpr Field kFields[] = {
    {"model", kBoth, Use::kImplemented},
    {"prompt", kCompletions, Use::kImplemented},
    {"messages", kChats, Use::kImplemented},
    {"max_tokens", kBoth, Use::kImplemented},
    {"max_completion_tokens", kChats, Use::kImplemented},
    {"temperature", kBoth, Use::kImplemented},
    {"top_p", kBoth, Use::kImplemented},
    {"top_k", kBoth, Use::kImplemented},
    {"seed", kBoth, Use::kImplemented},
    {"n", kBoth, Use::kImplemented},
    {"stop", kBoth, Use::kImplemented},
    {"stop_token_ids", kBoth, Use::kImplemented},
    {"ignore_eos", kBoth, Use::kImplemented},
    {"min_tokens", kBoth, Use::kImplemented},
    {"presence_penalty", kBoth, Use::kImplemented},
    {"frequency_penalty", kBoth, Use::kImplemented},
    {"repetition_penalty", kBoth, Use::kImplemented},
    {"logit_bias", kBoth, Use::kImplemented},
    {"logprobs", kBoth, Use::kImplemented},
    {"top_logprobs", kChats, Use::kImplemented},
    {"stream", kBoth, Use::kImplemented},
    {"stream_options", kBoth, Use::kImplemented},
    {"echo", kCompletions, Use::kImplemented},
    {"best_of", kCompletions, Use::kImplemented},  // 1 or n
    {"add_special_tokens", kBoth, Use::kImplemented},
    {"add_generation_prompt", kChats, Use::kImplemented},
    {"chat_template_kwargs", kChats, Use::kImplemented},
    {"tools", kChats, Use::kImplemented},
    {"tool_choice", kChats, Use::kImplemented},
    {"parallel_tool_calls", kChats, Use::kImplemented},
    {"include_reasoning", kChats, Use::kImplemented},
    {"user", kBoth, Use::kImplemented},    // a string; ignored
    {"metadata", kBoth, Use::kIgnored},
    {"store", kBoth, Use::kIgnored},
    {"service_tier", kBoth, Use::kIgnored},
    {"prompt_cache_key", kBoth, Use::kIgnored},
    {"safety_identifier", kBoth, Use::kIgnored},
    {"suffix", kCompletions, Use::kUnsupported, R"("")"},
    {"include_stop_str_in_output", kBoth, Use::kUnsupported, "false"},
    {"skip_special_tokens", kBoth, Use::kUnsupported, "true"},
    {"spaces_between_special_tokens", kBoth, Use::kUnsupported, "true"},
    {"response_format", kBoth, Use::kImplemented},
    {"function_call", kChats, Use::kUnsupported, R"("none")", kLegacyFunctions},
    {"functions", kChats, Use::kUnsupported, "[]", kLegacyFunctions},
    {"modalities", kChats, Use::kUnsupported, R"(["text"])"},
    {"continue_final_message", kChats, Use::kUnsupported, "false"},
    {"echo", kChats, Use::kUnsupported, "false"},
    {"documents", kChats, Use::kUnsupported},
    {"chat_template", kChats, Use::kUnsupported, nullptr, " (the model's chat template is used)"},
    {"audio", kChats, Use::kUnsupported},
    {"prediction", kChats, Use::kUnsupported},
    {"reasoning_effort", kChats, Use::kUnsupported, nullptr,
     " (a model's thinking switch, such as Qwen 3's enable_thinking, goes in "
     "chat_template_kwargs)"},
    {"verbosity", kChats, Use::kUnsupported},
    {"web_search_options", kChats, Use::kUnsupported},
    {"min_p", kBoth, Use::kUnsupported},
    {"typical_p", kBoth, Use::kUnsupported},
    {"top_a", kBoth, Use::kUnsupported},
    {"use_beam_search", kBoth, Use::kUnsupported},
    {"length_penalty", kBoth, Use::kUnsupported},
    {"guided_json", kBoth, Use::kUnsupported},
    {"guided_regex", kBoth, Use::kUnsupported},
    {"guided_choice", kBoth, Use::kUnsupported},
    {"guided_grammar", kBoth, Use::kUnsupported},
    {"guided_decoding_backend", kBoth, Use::kUnsupported},
    {"guided_whitespace_pattern", kBoth, Use::kUnsupported},
    {"structured_outputs", kBoth, Use::kUnsupported},
    {"bad_words", kBoth, Use::kUnsupported},
    {"allowed_token_ids", kBoth, Use::kUnsupported},
    {"prompt_logprobs", kBoth, Use::kUnsupported},
    {"truncate_prompt_tokens", kBoth, Use::kUnsupported},
    {"logits_processors", kBoth, Use::kUnsupported},
    {"return_tokens_as_token_ids", kBoth, Use::kUnsupported},
    {"return_token_ids", kBoth, Use::kUnsupported},
};

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::Status Unknown(std::string_view field, std::string_view endpoint) {
  return InvalidParam(field, fmt::format("Unrecognized request argument supplied: {} ({} does not "
                                         "know it; Lockstep rejects unknown fields rather than "
                                         "ignore them)",
                                         field, endpoint));
}

const Field* Find(std::string_view name, uint8_t api) {
  for (const Field& field : kFields) {
    if (field.name == name && (field.apis & api) != 0) return &field;
  }
  return nullptr;
}

// stream_options: include_usage is implemented, include_obfuscation changes no text.
absl::Status CheckStreamOptions(const json& options) {
  if (!options.is_object()) return absl::OkStatus();  // the parser names the type error
  for (const auto& [key, value] : options.items()) {
    if (value.is_null() || key == "include_usage" || key == "include_obfuscation") continue;
    const std::string field = "stream_options." + key;
    if (key == "continuous_usage_stats") {
      if (value == false) continue;
      return InvalidParam(field, fmt::format("{} is not supported (only false)", field));
    }
    return Unknown(field, "stream_options");
  }
  return absl::OkStatus();
}

template <typename BasicJson>
std::string Preview(const BasicJson& value) {
  if (value.is_array() || value.is_object()) return value.type_name();
  if (value.is_string() && value.template get_ref<const std::string&>().size() > 40) {
    return Dump(json(value.template get_ref<const std::string&>().substr(0, 40))) + "...";
  }
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

JsonBounds RequestJsonBounds(const RequestLimits& limits) {
  return {.max_depth = kDefaultMaxJsonDepth,
          .max_values = kDefaultMaxJsonValues + std::max<int64_t>(limits.max_prompt_tokens, 0)};
}

template <typename BasicJson>
absl::StatusOr<BasicJson> ParseRequestBody(std::string_view body, const JsonBounds& bounds) {
  absl::StatusOr<BasicJson> doc = ParseBoundedJson<BasicJson>(body, bounds);
  if (!doc.ok()) {
    return InvalidParam("",
                        fmt::format("The request body is {}", std::string(doc.status().message())));
  }
  if (!doc->is_object()) return InvalidParam("", "The request body must be a JSON object");
  return doc;
}

template absl::StatusOr<json> ParseRequestBody<json>(std::string_view, const JsonBounds&);
template absl::StatusOr<nlohmann::ordered_json> ParseRequestBody<nlohmann::ordered_json>(
    std::string_view, const JsonBounds&);

std::string JsonPreview(const json& value) { return Preview(value); }
std::string JsonPreview(const nlohmann::ordered_json& value) { return Preview(value); }

absl::Status CheckOpenAiFields(ApiKind kind, const json& body) {
  const uint8_t api = kind == ApiKind::kChat ? kChats : kCompletions;
  const std::string_view endpoint =
      kind == ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions";
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    const Field* field = Find(key, api);
    if (field == nullptr) return Unknown(key, endpoint);
    if (key == "stream_options") {
      if (absl::Status status = CheckStreamOptions(value); !status.ok()) return status;
    }
    if (field->use != Use::kUnsupported) continue;
    if (field->no_op == nullptr) {
      return InvalidParam(key, fmt::format("{} is not supported{}", key, field->why));
    }
    const json no_op = json::parse(field->no_op, nullptr, /*allow_exceptions=*/false);
    if (value != no_op) {
      return InvalidParam(
          key, fmt::format("{} is not supported (only {}){}", key, Dump(no_op), field->why));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckKnownFields(const json& body, absl::Span<const std::string_view> known,
                              std::string_view endpoint) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null() || std::find(known.begin(), known.end(), key) != known.end()) continue;
    return Unknown(key, endpoint);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::router

#include "runtime/router/http/tokenize_api.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "common/status_macros.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "runtime/router/http/chat_prompt.h"
#include "runtime/router/http/request_fields.h"

namespace lockstep::router {
namespace {

using nlohmann::json;
using Json = nlohmann::ordered_json;

constexpr std::string_view kTokenizeFields[] = {"model",
                                                "prompt",
                                                "messages",
                                                "add_special_tokens",
                                                "add_generation_prompt",
                                                "chat_template_kwargs",
                                                "tools"};
constexpr std::string_view kDetokenizeFields[] = {"model", "tokens"};

// The field `key` of `doc` (an object), or null when absent or JSON null; read in
// place, never copied.
const Json* Field(const Json& doc, const char* key) {
  const auto it = doc.find(key);
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

// The request object (within the body's JSON bounds), with only `known` fields and a
// string "model" naming the served model. Kept in the client's key order (the chat
// template sees it).
absl::StatusOr<Json> ParseBody(std::string_view body, absl::Span<const std::string_view> known,
                               std::string_view endpoint, const RequestLimits& limits) {
  ASSIGN_OR_RETURN(Json doc, ParseRequestBody<Json>(body, RequestJsonBounds(limits)));
  RETURN_IF_ERROR(CheckKnownFields(doc, known, endpoint));
  const Json* model = Field(doc, "model");
  if (model == nullptr || !model->is_string()) {
    return InvalidParam("model", "model is required (a string)");
  }
  RETURN_IF_ERROR(ValidateModel(model->get<std::string>(), limits));
  return doc;
}

}  // namespace

absl::StatusOr<std::string> Tokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                     const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const Json doc, ParseBody(body, kTokenizeFields, "/v1/tokenize", limits));
  std::vector<int32_t> ids;
  const Json* prompt = Field(doc, "prompt");
  const Json* messages = Field(doc, "messages");
  if (prompt != nullptr && prompt->is_string() && messages == nullptr) {
    const Json* add = Field(doc, "add_special_tokens");
    if (add != nullptr && !add->is_boolean()) {
      return InvalidParam(
          "add_special_tokens",
          fmt::format("add_special_tokens must be a boolean, got {}", add->type_name()));
    }
    ids = tokenizer.Encode(prompt->get<std::string>(), add == nullptr || add->get<bool>());
  } else if (messages != nullptr && prompt == nullptr) {
    ASSIGN_OR_RETURN(const ChatPromptOptions options, ParseChatPromptOptions(doc));
    ASSIGN_OR_RETURN(ids, EncodeChatPrompt(*messages, tokenizer, options));
  } else {
    return InvalidParam("prompt", "exactly one of prompt (a string) and messages is required");
  }
  return json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", limits.max_prompt_tokens}}
      .dump();
}

absl::StatusOr<std::string> Detokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                       const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const Json doc, ParseBody(body, kDetokenizeFields, "/v1/detokenize", limits));
  const Json* tokens = Field(doc, "tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    return InvalidParam("tokens", "tokens must be an array of token ids");
  }
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const Json& id : *tokens) {
    // Unsigned first: a value past int64 must not wrap to a small id.
    const bool in_range = id.is_number_unsigned()
                              ? id.get<uint64_t>() <= std::numeric_limits<int32_t>::max()
                              : id.is_number_integer() && id.get<int64_t>() >= 0 &&
                                    id.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!in_range) return InvalidParam("tokens", "tokens must be an array of token ids");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  RETURN_IF_ERROR(ValidateTokenIds(ids, limits, "tokens"));
  return json{{"prompt", tokenizer.Detokenize(ids)}}.dump(-1, ' ', false,
                                                          json::error_handler_t::replace);
}

}  // namespace lockstep::router

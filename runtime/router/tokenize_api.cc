#include "runtime/router/tokenize_api.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "common/status_macros.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "runtime/router/chat_prompt.h"
#include "runtime/router/request_fields.h"

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

// The request object, with only `known` fields and a string "model" naming the served
// model. Kept in the client's key order (the chat template sees it).
absl::StatusOr<Json> ParseBody(std::string_view body, absl::Span<const std::string_view> known,
                               std::string_view endpoint, const RequestLimits& limits) {
  Json doc = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidParam("", "The request body is not valid JSON");
  if (!doc.is_object()) return InvalidParam("", "The request body must be a JSON object");
  RETURN_IF_ERROR(CheckKnownFields(doc, known, endpoint));
  const Json model = doc.value("model", Json());
  if (!model.is_string()) return InvalidParam("model", "model is required (a string)");
  RETURN_IF_ERROR(ValidateModel(model.get<std::string>(), limits));
  return doc;
}

}  // namespace

absl::StatusOr<std::string> Tokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                     const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const Json doc, ParseBody(body, kTokenizeFields, "/v1/tokenize", limits));
  std::vector<int32_t> ids;
  const Json prompt = doc.value("prompt", Json());
  const Json messages = doc.value("messages", Json());
  if (prompt.is_string() && messages.is_null()) {
    const Json add = doc.value("add_special_tokens", Json(true));
    if (!add.is_boolean()) {
      return InvalidParam(
          "add_special_tokens",
          fmt::format("add_special_tokens must be a boolean, got {}", add.type_name()));
    }
    ids = tokenizer.Encode(prompt.get<std::string>(), add.get<bool>());
  } else if (!messages.is_null() && prompt.is_null()) {
    ASSIGN_OR_RETURN(const ChatPromptOptions options, ParseChatPromptOptions(doc));
    ASSIGN_OR_RETURN(ids, EncodeChatPrompt(messages, tokenizer, options));
  } else {
    return InvalidParam("prompt", "exactly one of prompt (a string) and messages is required");
  }
  return json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", limits.max_prompt_tokens}}
      .dump();
}

absl::StatusOr<std::string> Detokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                       const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const Json doc, ParseBody(body, kDetokenizeFields, "/v1/detokenize", limits));
  const Json tokens = doc.value("tokens", Json());
  if (!tokens.is_array()) return InvalidParam("tokens", "tokens must be an array of token ids");
  std::vector<int32_t> ids;
  for (const Json& id : tokens) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidParam("tokens", "tokens must be an array of token ids");
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  RETURN_IF_ERROR(ValidateTokenIds(ids, limits, "tokens"));
  return json{{"prompt", tokenizer.Detokenize(ids)}}.dump(-1, ' ', false,
                                                          json::error_handler_t::replace);
}

}  // namespace lockstep::router

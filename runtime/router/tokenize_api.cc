#include "runtime/router/tokenize_api.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"
#include "runtime/router/openai_api.h"

namespace lockstep::router {
namespace {

using nlohmann::json;

// The request object with a string "model" naming the served model.
absl::StatusOr<json> ParseBody(std::string_view body, const RequestLimits& limits) {
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidParam("", "The request body is not valid JSON");
  if (!doc.is_object()) return InvalidParam("", "The request body must be a JSON object");
  const json model = doc.value("model", json());
  if (!model.is_string()) return InvalidParam("model", "model is required (a string)");
  RETURN_IF_ERROR(ValidateModel(model.get<std::string>(), limits));
  return doc;
}

}  // namespace

absl::StatusOr<std::string> Tokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                     const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const json doc, ParseBody(body, limits));
  std::vector<int32_t> ids;
  const json prompt = doc.value("prompt", json());
  const json messages = doc.value("messages", json());
  if (prompt.is_string() && messages.is_null()) {
    const json add = doc.value("add_special_tokens", json(true));
    if (!add.is_boolean()) {
      return InvalidParam(
          "add_special_tokens",
          fmt::format("add_special_tokens must be a boolean, got {}", add.type_name()));
    }
    ids = tokenizer.Encode(prompt.get<std::string>(), add.get<bool>());
  } else if (!messages.is_null() && prompt.is_null()) {
    ASSIGN_OR_RETURN(ids, EncodeChatPrompt(messages, tokenizer));
  } else {
    return InvalidParam("prompt", "exactly one of prompt (a string) and messages is required");
  }
  return json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", limits.max_prompt_tokens}}
      .dump();
}

absl::StatusOr<std::string> Detokenize(std::string_view body, const ServingTokenizer& tokenizer,
                                       const RequestLimits& limits) {
  ASSIGN_OR_RETURN(const json doc, ParseBody(body, limits));
  const json tokens = doc.value("tokens", json());
  if (!tokens.is_array()) return InvalidParam("tokens", "tokens must be an array of token ids");
  std::vector<int32_t> ids;
  for (const json& id : tokens) {
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

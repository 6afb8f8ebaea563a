#include "runtime/router/core/request_validation.h"

#include <algorithm>
#include <optional>

#include "absl/strings/cord.h"
#include "common/status_macros.h"
#include "fmt/format.h"
#include "grammar/matcher.h"

namespace lockstep::router {
namespace {

constexpr char kParamPayload[] = "lockstep.router/param";
constexpr char kCodePayload[] = "lockstep.router/code";

absl::Status WithCode(absl::Status status, std::string_view code) {
  status.SetPayload(kCodePayload, absl::Cord(absl::string_view(code.data(), code.size())));
  return status;
}

std::string Payload(const absl::Status& status, const char* key) {
  auto value = status.GetPayload(key);
  return value ? std::string(*value) : "";
}

}  // namespace

absl::Status InvalidParam(std::string_view param, std::string_view message) {
  absl::Status status =
      absl::InvalidArgumentError(absl::string_view(message.data(), message.size()));
  status.SetPayload(kParamPayload, absl::Cord(absl::string_view(param.data(), param.size())));
  return status;
}

std::string ParamOf(const absl::Status& status) { return Payload(status, kParamPayload); }
std::string ErrorCodeOf(const absl::Status& status) { return Payload(status, kCodePayload); }

absl::Status ValidateModel(const std::string& model, const RequestLimits& limits) {
  if (model == limits.model) return absl::OkStatus();
  // NOT_FOUND, not INVALID_ARGUMENT: OpenAI clients expect 404 for an unknown model.
  absl::Status status = absl::NotFoundError(
      fmt::format("The model '{}' does not exist; this router serves '{}'", model, limits.model));
  status.SetPayload(kParamPayload, absl::Cord("model"));
  return WithCode(std::move(status), "model_not_found");
}

absl::Status ValidateTokenIds(absl::Span<const int32_t> ids, const RequestLimits& limits,
                              std::string_view param, std::string_view what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= limits.vocab_size) {
      return InvalidParam(param, fmt::format("{} {} at position {} is outside the vocabulary "
                                             "[0, {})",
                                             what, ids[i], i, limits.vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateRouterRequest(const RouterRequest& request, const RequestLimits& limits) {
  if (absl::Status status = ValidateModel(request.model, limits); !status.ok()) return status;
  if (request.prompt.empty()) return InvalidParam("prompt", "The prompt is empty");
  if (static_cast<int64_t>(request.prompt.size()) > limits.max_prompt_tokens) {
    return WithCode(
        InvalidParam("prompt", fmt::format("The prompt has {} tokens; the maximum is {}",
                                           request.prompt.size(), limits.max_prompt_tokens)),
        "context_length_exceeded");
  }
  RETURN_IF_ERROR(ValidateTokenIds(request.prompt, limits, "prompt", "Prompt token"));
  if (request.stop.size() > kMaxStopStrings) {
    return InvalidParam("stop", fmt::format("stop may hold at most {} sequences, got {}",
                                            kMaxStopStrings, request.stop.size()));
  }
  for (size_t i = 0; i < request.stop.size(); ++i) {
    if (request.stop[i].empty()) {
      return InvalidParam("stop", fmt::format("stop[{}] must be a non-empty string", i));
    }
  }
  // Before the scheduler's checks, which look at each one.
  if (request.sampling.stop_token_ids.size() > kMaxStopTokenIds) {
    return InvalidParam("stop_token_ids",
                        fmt::format("stop_token_ids may hold at most {} token ids, got {}",
                                    kMaxStopTokenIds, request.sampling.stop_token_ids.size()));
  }
  if (request.sampling.logit_bias.size() > kMaxLogitBias) {
    return InvalidParam("logit_bias",
                        fmt::format("logit_bias may hold at most {} tokens, got {}", kMaxLogitBias,
                                    request.sampling.logit_bias.size()));
  }
  if (absl::Status status = request.sampling.Validate(limits.vocab_size); !status.ok()) {
    // The scheduler's messages start with the field name ("top_p must be ...").
    const std::string message(status.message());
    const size_t space = message.find(' ');
    const std::string param = message.substr(0, std::min(message.find(':'), space));
    return InvalidParam(param, message);
  }
  // The rank that owns the request compiles it again for its vocabulary; a grammar that
  // does not compile is the client's error, named here rather than when it is sampled.
  if (request.sampling.grammar.has_value()) {
    if (absl::Status status = grammar::CheckGrammarSpec(*request.sampling.grammar);
        !status.ok()) {
      return InvalidParam("grammar", fmt::format("the grammar does not compile: {}",
                                                 std::string(status.message())));
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::router

#include "runtime/router/request_validation.h"

#include <algorithm>
#include <optional>

#include "absl/strings/cord.h"
#include "fmt/format.h"

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

absl::Status ValidateRouterRequest(const RouterRequest& request, const RequestLimits& limits) {
  if (request.model != limits.model) {
    // NOT_FOUND, not INVALID_ARGUMENT: OpenAI clients expect 404 for an unknown model.
    absl::Status status = absl::NotFoundError(fmt::format(
        "The model '{}' does not exist; this router serves '{}'", request.model, limits.model));
    status.SetPayload(kParamPayload, absl::Cord("model"));
    return WithCode(std::move(status), "model_not_found");
  }
  if (request.prompt.empty()) return InvalidParam("prompt", "The prompt is empty");
  if (static_cast<int64_t>(request.prompt.size()) > limits.max_prompt_tokens) {
    return WithCode(
        InvalidParam("prompt", fmt::format("The prompt has {} tokens; the maximum is {}",
                                           request.prompt.size(), limits.max_prompt_tokens)),
        "context_length_exceeded");
  }
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const int32_t id = request.prompt[i];
    if (id < 0 || id >= limits.vocab_size) {
      return InvalidParam("prompt", fmt::format("Prompt token {} at position {} is outside the "
                                                "vocabulary [0, {})",
                                                id, i, limits.vocab_size));
    }
  }
  if (absl::Status status = request.sampling.Validate(limits.vocab_size); !status.ok()) {
    // The scheduler's messages start with the field name ("top_p must be ...").
    const std::string message(status.message());
    const size_t space = message.find(' ');
    const std::string param = message.substr(0, std::min(message.find(':'), space));
    return InvalidParam(param, message);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::router

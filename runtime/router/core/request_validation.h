// Checks a RouterRequest against what the router serves, for both client APIs. An
// invalid request gets INVALID_ARGUMENT naming the offending parameter, which the HTTP
// API reports as the OpenAI error's "param" (and gRPC as INVALID_ARGUMENT). A model
// other than the served one is NOT_FOUND (HTTP 404, code "model_not_found").
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_VALIDATION_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/config/message_limits.h"
#include "runtime/router/core/router_request.h"

namespace lockstep::router {

inline constexpr size_t kMaxStopStrings = 4;  // as OpenAI allows
// Most stop_token_ids and logit_bias entries (config/message_limits.h: what a worker
// request is sized for).
inline constexpr size_t kMaxStopTokenIds = config::kMaxStopTokenIds;
inline constexpr size_t kMaxLogitBias = config::kMaxLogitBias;

struct RequestLimits {
  std::string model;
  int64_t max_prompt_tokens = 2048;
  int32_t vocab_size = 0;
};

absl::Status ValidateRouterRequest(const RouterRequest& request, const RequestLimits& limits);
// NOT_FOUND (code "model_not_found") unless `model` is the served one.
absl::Status ValidateModel(const std::string& model, const RequestLimits& limits);
// INVALID_ARGUMENT naming `param` for an id outside [0, vocab_size) ("{what} 7 at
// position 2 is outside ...").
absl::Status ValidateTokenIds(absl::Span<const int32_t> ids, const RequestLimits& limits,
                              std::string_view param, std::string_view what = "Token");

// INVALID_ARGUMENT with `message`, remembering `param` for ParamOf().
absl::Status InvalidParam(std::string_view param, std::string_view message);
// An optional boolean field `key` of a JSON request body (any nlohmann JSON type):
// `default_value` when absent or null, INVALID_ARGUMENT naming `key` when not a boolean.
template <typename Json>
absl::StatusOr<bool> OptionalBool(const Json& body, const char* key, bool default_value) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return default_value;
  if (!it->is_boolean()) {
    return InvalidParam(key, absl::StrCat(key, " must be a boolean, got ", it->type_name()));
  }
  return it->template get<bool>();
}
// The parameter an InvalidParam status names; "" when none.
std::string ParamOf(const absl::Status& status);
// "model_not_found" etc. for the OpenAI error's "code"; "" when none.
std::string ErrorCodeOf(const absl::Status& status);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_VALIDATION_H_

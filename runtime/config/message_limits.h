// What one generation request may carry between the router and the workers, and the
// gRPC message limits sized from it, so that gRPC never refuses a request within the
// configured limits (which the router would take for a broken stream and migrate;
// docs/security.md §5). The router refuses a request past these bounds with
// INVALID_ARGUMENT naming the field (runtime/router/core/request_validation.h).
//
// Header-only constants and pure functions; thread-safe.
#ifndef LOCKSTEP_RUNTIME_CONFIG_MESSAGE_LIMITS_H_
#define LOCKSTEP_RUNTIME_CONFIG_MESSAGE_LIMITS_H_

#include <algorithm>
#include <cstdint>
#include <limits>

namespace lockstep::config {

// Most stop_token_ids and logit_bias entries of one request.
inline constexpr int64_t kMaxStopTokenIds = 1024;
inline constexpr int64_t kMaxLogitBias = 1024;

// gRPC's default receive limit; no limit below it is ever set.
inline constexpr int64_t kGrpcDefaultMessageBytes = int64_t{4} << 20;

// An upper bound on the encoded size of a WorkerService GenerateRequest
// (proto/worker.proto) whose prompt has at most `prompt_tokens` ids and whose sampling
// fields are within the bounds above: 5 bytes per prompt or stop token id (a varint of
// a non-negative int32 and nothing else per element of a packed field), 18 per
// logit_bias entry (a map entry: tag, length, key tag, varint key of up to 10 bytes,
// value tag, float), and 64 KiB for every other field (the scalars, the model's name,
// the context leg's result and first drafts).
constexpr int64_t MaxGenerateRequestBytes(int64_t prompt_tokens) {
  return 5 * std::max<int64_t>(prompt_tokens, 0) + 5 * kMaxStopTokenIds + 18 * kMaxLogitBias +
         (int64_t{64} << 10);
}

// A gRPC max message size (an int) for messages of up to `bytes`: at least gRPC's
// default, at most INT_MAX.
constexpr int GrpcMessageLimit(int64_t bytes) {
  return static_cast<int>(
      std::clamp<int64_t>(bytes, kGrpcDefaultMessageBytes, std::numeric_limits<int32_t>::max()));
}

}  // namespace lockstep::config

#endif  // LOCKSTEP_RUNTIME_CONFIG_MESSAGE_LIMITS_H_

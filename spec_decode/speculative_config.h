// What an instance speculates with: the method, K (`num_draft_tokens`), whether K adapts
// per request, and the n-gram drafter's longest match. The deployment YAML's
// `speculative:` block (runtime/config) parses into this struct; the executor, the
// scheduler and the engines read it. docs/design.md §6.
//
// Value type; thread-compatible.
#ifndef LOCKSTEP_SPEC_DECODE_SPECULATIVE_CONFIG_H_
#define LOCKSTEP_SPEC_DECODE_SPECULATIVE_CONFIG_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep::spec {

// Largest K anywhere (the engines size their buffers by it).
inline constexpr int kMaxDraftTokens = 16;
// Longest n the n-gram drafter may match.
inline constexpr int kMaxNgram = 16;

enum class Method {
  kNone,        // no speculation
  kDraftModel,  // a second, smaller model proposes (its KV in a draft pool)
  kNgram,       // prompt lookup: copy what followed the last match (no draft KV)
};

const char* MethodName(Method method);
// "none", "draft_model", "ngram"; InvalidArgument naming the accepted values otherwise.
absl::StatusOr<Method> ParseMethod(std::string_view name);

struct SpeculativeConfig {
  Method method = Method::kNone;
  // K: the most drafts proposed and verified per generation step (1..16 with a method;
  // must be 0 with kNone).
  int32_t num_draft_tokens = 0;
  // Choose K per request each step from its acceptance rate (dynamic_k.h), at most
  // num_draft_tokens.
  bool dynamic = false;
  // kNgram: match the last n tokens for n from ngram_max down to 1 (1..16).
  int32_t ngram_max = 3;

  // Speculation is on.
  bool enabled() const { return method != Method::kNone && num_draft_tokens > 0; }
  // The method keeps KV of its own (a draft pool).
  bool needs_draft_kv() const { return method == Method::kDraftModel && num_draft_tokens > 0; }

  // InvalidArgument naming the field and the rule.
  absl::Status Validate() const;
};

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_SPECULATIVE_CONFIG_H_

// What an instance speculates with: the method, K (`num_draft_tokens`), whether K adapts
// per request, and the n-gram drafter's longest match. One type everywhere: the
// deployment YAML's `speculative:` block (runtime/config) parses into it, the scheduler
// config holds it, and the executor, the scheduler and the engines read it; its rules
// are checked here once. docs/design.md §6.
//
// Value type; thread-compatible.
#ifndef LOCKSTEP_SPEC_DECODE_SPECULATIVE_CONFIG_H_
#define LOCKSTEP_SPEC_DECODE_SPECULATIVE_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_types.h"
#include "spec_decode/dynamic_k.h"

namespace lockstep::spec {

// Largest K anywhere (the engines size their buffers by it).
inline constexpr int kMaxDraftTokens = 16;
// Longest n the n-gram drafter may match.
inline constexpr int kMaxNgram = 16;

enum class Method {
  kNone,        // no speculation
  kDraftModel,  // a second, smaller model proposes (its KV in a draft pool)
  kNgram,       // prompt lookup: copy what followed the last match (no draft KV)
  kMtp,         // the target's own multi-token-prediction module (its KV in a draft pool)
};

const char* MethodName(Method method);
// "none", "draft_model", "ngram", "mtp"; InvalidArgument naming the accepted values otherwise.
absl::StatusOr<Method> ParseMethod(std::string_view name);

// One rule a SpeculativeConfig breaks: the field as the YAML block names it
// ("num_draft_tokens") and what is wrong with it ("must be in [1, 16], got 17").
struct ConfigProblem {
  std::string field;
  std::string message;
};

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

  bool operator==(const SpeculativeConfig&) const = default;

  // Speculation is on.
  bool enabled() const { return method != Method::kNone && num_draft_tokens > 0; }
  // The method keeps KV of its own (a draft pool): the draft model and MTP.
  bool needs_draft_kv() const {
    return (method == Method::kDraftModel || method == Method::kMtp) && num_draft_tokens > 0;
  }

  // Every rule the fields break, in field order; empty when valid.
  std::vector<ConfigProblem> Problems() const;
  // What is wrong with running over a draft KV pool in `draft_pool` mode, in the words
  // of a message about the pool's field ("must be none with speculative.method ngram
  // ..."); empty when nothing is: the draft model and MTP need a pool, the others none.
  std::string DraftPoolProblem(kv::DraftMode draft_pool) const;
  // InvalidArgument listing Problems() as "field: message", one per line.
  absl::Status Validate() const;

  // K of one request's next generation step (or its last context chunk): 0 without
  // speculation; num_draft_tokens, or with dynamic K the request's own choice
  // (`request`, made by MakeDynamicK; null: the pad dummy, which always takes
  // num_draft_tokens).
  int32_t StepDraftTokens(const DynamicK* request) const;
  // A request's dynamic K, choosing at most num_draft_tokens.
  DynamicK MakeDynamicK() const { return DynamicK(enabled() ? num_draft_tokens : 0); }
};

}  // namespace lockstep::spec

#endif  // LOCKSTEP_SPEC_DECODE_SPECULATIVE_CONFIG_H_

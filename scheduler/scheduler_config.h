// Limits and knobs of the per-rank scheduling policy.
#ifndef LOCKSTEP_SCHEDULER_SCHEDULER_CONFIG_H_
#define LOCKSTEP_SCHEDULER_SCHEDULER_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sched {

// How a rank pads a step in which it has nothing to forward (docs/design.md §1).
enum class DummyPolicy {
  // TensorRT-LLM's behaviour: the dummy competes for KV like any request and is refused
  // at max_num_active_requests, so a full rank vetoes the forward on every rank.
  kCompat,
  // A request slot and enough KV for the dummy are reserved at start-up, outside
  // max_num_active_requests: padding cannot be refused.
  kReserved,
};

const char* DummyPolicyName(DummyPolicy policy);

struct SchedulerConfig {
  // Most requests (context chunks + generation steps) in one step's batch.
  int32_t max_batch_size = 8;
  // Most tokens in one step's batch (a generation step costs 1 + K tokens).
  int64_t max_num_tokens = 512;
  // Most requests a rank holds, including requests waiting for KV (not the dummy under
  // kReserved). Enforced by rank assignment and by the pad decision.
  int32_t max_num_active_requests = 16;
  // Largest prefill chunk per request per step (chunked prefill).
  int64_t chunk_size = 256;
  // Speculative decoding: who proposes drafts (kDraftModel needs a draft KV pool,
  // kNgram none), K (num_draft_tokens: proposed and verified per generation step; with
  // dynamic K the most, the KV grant following each request's choice).
  spec::SpeculativeConfig speculative;
  // Reuse committed prefixes for new context caches, in every draft mode: a paired
  // draft cache reuses the prefix committed in both pools; an unpaired mirror reuses
  // its own pool's prefix (at most the target's) and the draft model prefills the rest.
  bool prefix_reuse = true;
  DummyPolicy dummy_policy = DummyPolicy::kReserved;
  // Positions the model supports (engine::EngineInfo::max_position; 0: no limit): no
  // step's K reaches past them (spec::CapDraftTokens). The executor sets it from its
  // engine.
  int64_t max_position = 0;

  // Most tokens of KV one generation step grows a cache by (the dummy's, always).
  int64_t generation_step_tokens() const { return 1 + speculative.StepDraftTokens(nullptr); }

  absl::Status Validate() const {
    if (max_batch_size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_batch_size must be >= 1, got ", max_batch_size));
    }
    if (max_num_active_requests < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_num_active_requests must be >= 1, got ", max_num_active_requests));
    }
    if (const auto problems = speculative.Problems(); !problems.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("speculative.", problems[0].field, ": ", problems[0].message));
    }
    if (max_num_tokens < generation_step_tokens()) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_num_tokens must be >= 1 + speculative.num_draft_tokens (",
                       generation_step_tokens(), "), got ", max_num_tokens));
    }
    if (chunk_size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("chunk_size must be >= 1, got ", chunk_size));
    }
    return absl::OkStatus();
  }
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_SCHEDULER_CONFIG_H_

// The per-rank scheduling policy's configuration: the knobs the deployment sets
// (scheduler_settings.h) and what the worker derives from elsewhere. Value type;
// thread-compatible.
#ifndef LOCKSTEP_SCHEDULER_SCHEDULER_CONFIG_H_
#define LOCKSTEP_SCHEDULER_SCHEDULER_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/scheduler_settings.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sched {

// The knobs, and the speculative block, prefix reuse (both from the deployment's other
// blocks) and the model's length (from the engine).
struct SchedulerConfig : SchedulerSettings {
  // Speculative decoding: who proposes drafts (kDraftModel needs a draft KV pool,
  // kNgram none), K (num_draft_tokens: proposed and verified per generation step; with
  // dynamic K the most, the KV grant following each request's choice).
  spec::SpeculativeConfig speculative;
  // Reuse committed prefixes for new context caches, in every draft mode: a paired
  // draft cache reuses the prefix committed in both pools; an unpaired mirror reuses
  // its own pool's prefix (at most the target's) and the draft model prefills the rest.
  bool prefix_reuse = true;
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

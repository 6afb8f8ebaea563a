#include "runtime/executor/executor_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::exec {

absl::Status ExecutorConfig::Validate() const {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world_size must be >= 1, got ", world_size));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, ", world_size, "), got ", rank));
  }
  if (absl::Status s = scheduler.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scheduler: ", s.message()));
  }
  if (absl::Status s = kv.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("kv: ", s.message()));
  }
  if (const std::string pool = scheduler.speculative.DraftPoolProblem(kv.draft_mode);
      !pool.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("kv.draft_mode: ", pool));
  }
  if (scheduler.dummy_policy == sched::DummyPolicy::kReserved &&
      kv.dummy_reserved_tokens < scheduler.generation_step_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dummy_policy reserved needs kv.dummy_reserved_tokens >= 1 + "
                     "speculative.num_draft_tokens (",
                     scheduler.generation_step_tokens(), "), got ", kv.dummy_reserved_tokens));
  }
  if (collective_timeout <= absl::ZeroDuration() || engine_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("collective_timeout and engine_timeout must be > 0");
  }
  if (stats_ring_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("stats_ring_size must be >= 1, got ", stats_ring_size));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::exec

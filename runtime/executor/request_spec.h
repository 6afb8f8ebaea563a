// A new request as it enters an instance: what the client asked for, and where it must
// or should run. Built at the edge (runtime/worker/proto_convert.h), queued in the
// leader's Inbox and broadcast to every rank (intake.h).
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_REQUEST_SPEC_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_REQUEST_SPEC_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "common/ids.h"
#include "scheduler/request.h"
#include "scheduler/sampling_params.h"

namespace lockstep::exec {

struct NewRequestSpec {
  RequestId id;
  sched::RequestType type = sched::RequestType::kAggregated;
  std::vector<int32_t> prompt;
  sched::SamplingParams sampling;
  // Generation-only: where the KV is, and what the context leg produced.
  std::optional<sched::ContextSource> context_source;
  // Must run on this rank (or wait until it has room).
  std::optional<int32_t> pinned_rank;
  // The router's hint (where the prompt's prefix is cached): preferred below the cap.
  std::optional<int32_t> preferred_rank;
  absl::Time arrival;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_REQUEST_SPEC_H_

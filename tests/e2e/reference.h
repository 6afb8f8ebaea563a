// What the in-process engine produces for a set of requests: one rank, a solo
// communicator, the same Executor and CpuEngine code a worker runs. End-to-end tests
// compare served outputs with these.
#ifndef LOCKSTEP_TESTS_E2E_REFERENCE_H_
#define LOCKSTEP_TESTS_E2E_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/sampling_params.h"

namespace lockstep::e2e {

struct ReferenceRequest {
  std::vector<int32_t> prompt;
  sched::SamplingParams sampling;
};

// Output tokens of each request, in order. `draft_dir` empty: no speculation.
absl::StatusOr<std::vector<std::vector<int32_t>>> ReferenceGenerate(
    const std::string& model_dir, const std::string& draft_dir, int num_draft_tokens,
    const std::vector<ReferenceRequest>& requests);

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_REFERENCE_H_

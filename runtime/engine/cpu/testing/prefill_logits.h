// Test helper: the logits of every row of a batch of prompts prefilled from position 0
// by one forward of a ForwardModel, on blocks of a HostPool that are returned after.
// Thread-compatible (one caller per pool).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_PREFILL_LOGITS_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_PREFILL_LOGITS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/testing/test_models.h"

namespace lockstep::engine::testing {

// `out` gets [rows, vocab]: every position of seqs[0], then of seqs[1], ... The forward's
// error (a communicator failure) is returned as is.
absl::Status PrefillLogits(const ForwardModel& model, HostPool& pool,
                           const std::vector<std::vector<int32_t>>& seqs, std::vector<float>& out);

}  // namespace lockstep::engine::testing

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TESTING_PREFILL_LOGITS_H_

// The step vote: one small, fixed-size all-reduce per step that every rank joins
// (docs/design.md §3 step 6). Each field is reduced with max, so the vote is a single
// AllReduce(kMax) of `StepVote::kFields` int64 values.
//
// Reading the reduced vote: `can_queue` (the forward runs on every rank) iff no rank's
// batch is empty; every rank takes the same branch on the same reduced value. `errors`
// (failed requests and engine batches) goes to StepStats and the error-step counter.
// `rows` and `context` are the shape every rank's forward agrees on
// (engine::StepAgreement): a device engine sizes its expert-parallel exchange and picks
// the CUDA graph bucket it replays from them, so every rank replays the same one
// without another collective.
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_STEP_VOTE_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_STEP_VOTE_H_

#include <array>
#include <cstdint>

#include "absl/types/span.h"

namespace lockstep::exec {

struct StepVote {
  static constexpr int kFields = 6;

  int64_t empty_batch = 0;     // this rank scheduled nothing (vetoes the forward)
  int64_t nonempty_batch = 0;  // this rank scheduled something
  int64_t errors = 0;          // rank-local errors since the last vote (reduced: the most)
  int64_t busy = 0;            // this rank holds requests, claims or a batch in flight
  // The rows of this rank's target forward: 1 + K per generation step (the pad dummy's
  // included), every token of a context chunk (reduced: the most of any rank).
  int64_t rows = 0;
  int64_t context = 0;  // this rank's batch holds a context chunk

  std::array<int64_t, kFields> Encode() const {
    return {empty_batch, nonempty_batch, errors, busy, rows, context};
  }
  static StepVote Decode(absl::Span<const int64_t> v) {
    StepVote s;
    s.empty_batch = v[0];
    s.nonempty_batch = v[1];
    s.errors = v[2];
    s.busy = v[3];
    s.rows = v[4];
    s.context = v[5];
    return s;
  }

  // The forward runs on every rank.
  bool can_queue() const { return empty_batch == 0; }
  // Some rank had a batch but the forward did not run (an idle step is not a veto).
  bool vetoed() const { return empty_batch != 0 && nonempty_batch != 0; }
};

// The reduction the all-reduce performs, for tests and single-threaded harnesses.
inline StepVote ReduceVotes(absl::Span<const StepVote> votes) {
  StepVote out;
  for (const StepVote& v : votes) {
    auto a = out.Encode();
    const auto b = v.Encode();
    for (int i = 0; i < StepVote::kFields; ++i) a[i] = a[i] > b[i] ? a[i] : b[i];
    out = StepVote::Decode(a);
  }
  return out;
}

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_STEP_VOTE_H_

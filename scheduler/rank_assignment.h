// Deterministic assignment of new requests to the ranks of an attention-DP instance.
//
// Every rank runs this pure function on the same inputs (the all-gathered loads and
// the leader's broadcast of new requests) and gets the same answer, so no extra
// collective is needed to agree on who owns what (docs/design.md §3 step 1, §7.7).
//
// Rule (the anchor's, trtllm-executor-notes §7.4):
//   1. Pinned requests go to their rank if it is below the per-rank cap; then requests
//      with a rank hint (where the router found their prompt's prefix cached) go to
//      that rank if it is below the cap, and otherwise on as if they had none.
//   2. expected = min(max(ceil((total active + new) / ranks), max per-rank active), cap).
//   3. The rest, longest prompt first (ties: leader order), each among the ranks whose
//      active count is below `expected` to: a rank whose free KV holds the prompt (any
//      rank when none does), then the fewest tokens in flight, then the most free KV,
//      then the fewest active requests, then the lowest rank id. Each assignment adds
//      the prompt to the rank's tokens in flight and takes it from its free KV.
//   4. Requests that fit nowhere stay queued at the leader, in leader order.
#ifndef LOCKSTEP_SCHEDULER_RANK_ASSIGNMENT_H_
#define LOCKSTEP_SCHEDULER_RANK_ASSIGNMENT_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "common/ids.h"

namespace lockstep::sched {

struct RankLoad {
  static constexpr int64_t kUnknown = std::numeric_limits<int64_t>::max();

  int64_t active_requests = 0;  // includes requests waiting for KV; excludes the dummy
  // Tokens in flight: the sequence lengths (prompt + tokens generated so far) of those
  // requests.
  int64_t active_tokens = 0;
  // Tokens of KV a new request could get without pausing anyone (free and evictable
  // blocks, the tightest pool); kUnknown: not limited.
  int64_t free_kv_tokens = kUnknown;
};

struct NewRequest {
  RequestId id;
  int64_t prompt_tokens = 0;
  std::optional<int32_t> pinned_rank;  // must go to this rank (or wait)
  std::optional<int32_t> preferred_rank;  // a hint: this rank unless it is at the cap
};

struct RankAssignment {
  // rank_of[i] is the rank of new_requests[i], or -1 when it stays queued.
  std::vector<int32_t> rank_of;
  // Indices into new_requests that stay queued, in leader order.
  std::vector<int32_t> queued;
  int64_t expected_per_rank = 0;
};

// `loads` has one entry per rank. `per_rank_cap` is max_num_active_requests.
RankAssignment AssignRanks(absl::Span<const RankLoad> loads,
                           absl::Span<const NewRequest> new_requests, int64_t per_rank_cap);

// How unevenly the ranks' tokens in flight are spread: the largest over the mean (1:
// balanced, also when every rank is idle; N when one of N ranks holds everything).
double TokenImbalance(absl::Span<const RankLoad> loads);

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_RANK_ASSIGNMENT_H_

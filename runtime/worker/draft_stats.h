// Speculative decoding on the wire (proto/worker.proto DraftTokens): an instance's
// drafts by method, its generation steps by K, its generation requests by their
// current K and its acceptance by draft position for Stats, and one request's drafts
// for its Generate responses, from the executor's counters.
#ifndef LOCKSTEP_RUNTIME_WORKER_DRAFT_STATS_H_
#define LOCKSTEP_RUNTIME_WORKER_DRAFT_STATS_H_

#include "proto/worker.pb.h"
#include "runtime/executor/response.h"
#include "runtime/executor/step_stats.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::worker {

// `drafts_by_method`: one entry for the instance's method (none without speculation);
// `draft_k_steps`: the steps by K up to the largest K that ran (empty before any
// generation step); `draft_k_requests`: the requests by their current K, from 0 to the
// instance's K (or a larger K holding requests); `draft_position_proposed` /
// `_accepted`: by draft position from the first up to the last one proposed (empty
// before any draft was verified).
void SetDraftStats(const spec::SpeculativeConfig& speculative,
                   const exec::ExecutorCounters& counters, v1::StatsResponse* out);

// `drafts`, once the request has proposed any (its counts so far on this instance).
void SetRequestDrafts(spec::Method method, const exec::Response& response,
                      v1::GenerateResponse* out);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_DRAFT_STATS_H_

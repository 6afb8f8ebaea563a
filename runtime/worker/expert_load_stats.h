// Expert load on the wire (proto/worker.proto ExpertLoadStats): the instance's last
// expert-load window (docs/eplb.md), for Stats (the router's /metrics) and for the
// expert-load dump an offline plan reads (`lockstep expert-loads`).
#ifndef LOCKSTEP_RUNTIME_WORKER_EXPERT_LOAD_STATS_H_
#define LOCKSTEP_RUNTIME_WORKER_EXPERT_LOAD_STATS_H_

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "runtime/engine/cpu/expert_load.h"

namespace lockstep::worker {

// out->expert_load from `snapshot`: one ExpertLayerLoad per layer. Nothing before the
// first window (snapshot.windows == 0).
void SetExpertLoadStats(const engine::ExpertLoadSnapshot& snapshot, v1::StatsResponse* out);

// The snapshot `stats` carries (its Format() is the dump eplb_plan reads). Errors name
// the layer whose routed or computed counts do not match num_experts or num_ranks, and
// a message without any window.
absl::StatusOr<engine::ExpertLoadSnapshot> ExpertLoadFromStats(const v1::ExpertLoadStats& stats);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_EXPERT_LOAD_STATS_H_

// BatchInFlight: the deferred update (docs/design.md §3 phases 7–8). It owns the one
// batch this rank launched on the engine and has not processed yet, with what its
// completion needs to apply the results (InFlightEntry), and it holds the deferral
// table: the batch is processed at a step unless the fleet vetoed while this rank had a
// batch, in which case its host update waits for the next forward. The engine launch
// and the completion themselves are Executor's (executor_batch.cc).
//
// Owned by Executor; executor thread only (not thread-safe).
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_BATCH_IN_FLIGHT_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_BATCH_IN_FLIGHT_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "kvcache/kv_manager.h"

namespace lockstep::exec {

// One sequence of a launched batch.
struct InFlightEntry {
  RequestId id;
  uint64_t target_generation = 0;
  uint64_t draft_generation = 0;
  bool is_context = false;
  bool last_chunk = false;
  bool is_dummy = false;
  int64_t position = 0;          // context: first token of the chunk
  int64_t num_tokens = 0;        // context: chunk length
  int32_t num_draft_tokens = 0;  // K of this step (from its spec::Grant)
  int64_t target_grant = 0;      // capacity this step granted in the target pool
  int64_t draft_grant = 0;       // ... and in the draft pool (the draft gap included)
  // Context: draft positions prefilled before the chunk (ScheduledChunk::draft_position).
  int64_t draft_gap = 0;
};

// One launched step.
struct InFlightBatch {
  StepId step;
  std::vector<InFlightEntry> entries;
};

class BatchInFlight {
 public:
  // The deferral table: the batch in flight is processed this step iff every rank
  // forwards (`can_queue`) or this rank's own batch was empty.
  static bool ProcessPrevious(bool can_queue, bool local_nonempty) {
    return can_queue || !local_nonempty;
  }

  bool has_value() const { return batch_.has_value(); }
  // The batch in flight; only while has_value().
  const InFlightBatch& batch() const { return *batch_; }
  // Holds a batch just launched (the previous one was processed).
  void Hold(InFlightBatch launched) { batch_ = std::move(launched); }
  // The batch was processed.
  void Clear() { batch_.reset(); }

  // The step of the oldest batch an engine thread may still be running: the one in
  // flight, else `next_step`.
  int64_t OldestRunningStep(int64_t next_step) const {
    return batch_.has_value() ? batch_->step.value() : next_step;
  }
  // Tokens the batch in flight granted the cache of `id` in `pool` that has
  // `generation` (0 when none, or no batch).
  int64_t Granted(RequestId id, kv::PoolKind pool, uint64_t generation) const;

 private:
  std::optional<InFlightBatch> batch_;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_BATCH_IN_FLIGHT_H_

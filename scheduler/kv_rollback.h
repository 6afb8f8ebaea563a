// Rollback: undoes exactly one step's KV growth, in every pool, when the step is vetoed
// (docs/design.md §3 step 6, invariant §7.4).
//
// The scheduler records every cache it creates and every capacity it raises; Undo
// releases the created ids (through KvManager::Release, so every pool that holds them
// is freed — the pad dummy included) and shrinks the grown caches back, newest first.
// Commit forgets the records once the forward is launched.
//
// Thread safety: owned by the executor thread.
#ifndef LOCKSTEP_SCHEDULER_KV_ROLLBACK_H_
#define LOCKSTEP_SCHEDULER_KV_ROLLBACK_H_

#include <cstdint>
#include <vector>

#include "common/ids.h"
#include "kvcache/kv_manager.h"

namespace lockstep::sched {

class Rollback {
 public:
  // `id` got a new cache this step (target, and whatever pools came with it).
  void RecordCreate(RequestId id);
  // The capacity of `id` in `pool` was raised from `old_capacity` this step.
  void RecordGrow(RequestId id, kv::PoolKind pool, int64_t old_capacity);

  // Undoes every record, newest first. Returns the number of records undone.
  int Undo(kv::KvManager& kv);
  void Commit() { records_.clear(); }

  bool empty() const { return records_.empty(); }
  size_t size() const { return records_.size(); }

 private:
  struct Record {
    RequestId id;
    bool created = false;
    kv::PoolKind pool = kv::PoolKind::kTarget;
    int64_t old_capacity = 0;
  };
  std::vector<Record> records_;
};

}  // namespace lockstep::sched

#endif  // LOCKSTEP_SCHEDULER_KV_ROLLBACK_H_

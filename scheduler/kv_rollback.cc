#include "scheduler/kv_rollback.h"

#include "common/check.h"

namespace lockstep::sched {

void Rollback::RecordCreate(RequestId id) { records_.push_back({id, true}); }

void Rollback::RecordGrow(RequestId id, kv::PoolKind pool, int64_t old_capacity) {
  records_.push_back({id, false, pool, old_capacity});
}

int Rollback::Undo(kv::KvManager& kv) {
  int undone = 0;
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    if (it->created) {
      kv.Release(it->id);
    } else if (kv.Has(it->id, it->pool)) {
      // Shrinking back to a capacity the cache had at the start of the step cannot
      // fail: history only moves when a step's results are applied.
      LOCKSTEP_CHECK_OK(kv.Resize(it->id, it->pool, it->old_capacity, std::nullopt))
          << "rollback of request " << it->id << " in the " << kv::PoolKindName(it->pool)
          << " pool";
    }
    ++undone;
  }
  records_.clear();
  return undone;
}

}  // namespace lockstep::sched

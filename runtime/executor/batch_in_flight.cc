#include "runtime/executor/batch_in_flight.h"

namespace lockstep::exec {

int64_t BatchInFlight::Granted(RequestId id, kv::PoolKind pool, uint64_t generation) const {
  const bool target = pool == kv::PoolKind::kTarget;
  int64_t allowed = 0;
  if (batch_.has_value()) {
    for (const InFlightEntry& e : batch_->entries) {
      if (e.id == id && (target ? e.target_generation : e.draft_generation) == generation) {
        allowed += target ? e.target_grant : e.draft_grant;
      }
    }
  }
  return allowed;
}

}  // namespace lockstep::exec

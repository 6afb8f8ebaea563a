// CacheAudit: the executor's audit state (docs/design.md §3 phase 10, §7.6). It owns
// which cache generation every owner (live request or transfer claim) holds in each
// pool, the KV generation watermark of the last binding pass, and the violations found
// on the way through the current step (a veto that left growth behind, a cache older
// than its owner). The checks that need the executor's requests or batch stay in
// Executor::Audit, which adds these.
//
// Owned by Executor; executor thread only (not thread-safe).
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_CACHE_AUDIT_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_CACHE_AUDIT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "common/ids.h"
#include "kvcache/audit.h"
#include "kvcache/kv_manager.h"
#include "scheduler/schedule_decision.h"

namespace lockstep::exec {

class CacheAudit {
 public:
  // Start of a step: the previous step's violations are forgotten.
  void BeginStep() { step_violations_.clear(); }

  // Binds the caches `id` holds now that are not bound yet. An owner seen for the first
  // time in this pass appeared after the previous pass: a cache issued before that
  // pass cannot be its own (a predecessor's under the same id), and is a violation.
  void Bind(const kv::KvManager& kv, RequestId id);
  // Ends a binding pass over `num_owners` owners: when more bindings are held, those
  // whose id `is_owner` no longer names are dropped. Caches issued from now on are
  // newer than every owner bound so far.
  void EndPass(const kv::KvManager& kv, size_t num_owners,
               absl::FunctionRef<bool(RequestId)> is_owner);
  // `id` released its caches for good (its binding goes).
  void Forget(RequestId id) { bindings_.erase(id); }

  // Step `step` was not forwarded: compares the pools with `before` (taken before the
  // schedule that made `decision`) and records what growth survived.
  void AuditUnforwardedStep(int64_t step, const kv::KvSnapshot& before, const kv::KvManager& kv,
                            const sched::ScheduleDecision& decision);

  // Appends ownership by identity, capacities against `allowance` (tokens a cache may
  // hold beyond its history) and the violations recorded during this step.
  void AppendViolations(const kv::KvManager& kv,
                        absl::FunctionRef<int64_t(RequestId, kv::PoolKind, uint64_t)> allowance,
                        std::vector<std::string>* out) const;

  size_t num_bindings() const { return bindings_.size(); }

 private:
  // The caches an owner holds, by generation (docs/design.md §7.6).
  struct CacheBinding {
    uint64_t first_seen = 0;  // KvManager::next_generation() when the owner was first seen
    std::array<uint64_t, 2> generation{};  // by PoolKind; 0: none
  };

  absl::flat_hash_map<RequestId, CacheBinding> bindings_;
  uint64_t bind_watermark_ = 0;
  std::vector<std::string> step_violations_;
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_CACHE_AUDIT_H_

// Step-level KV audits (docs/design.md §7.1, §7.4, §7.6) over KvManager's public view, for
// the executor's per-step audit. KvManager::Audit checks what one moment's state must
// satisfy on its own (lengths, refcounts, owners by id); these checks compare it with
// what the caller knows: which cache each owner holds (by generation), the pools as they
// were before a step's schedule, and the capacity each cache was granted.
//
// Usage, one vetoed step:
//   const kv::KvSnapshot before = kv::TakeSnapshot(kv);
//   ... schedule (growth recorded in a Rollback), vote vetoes, rollback.Undo(kv) ...
//   for (std::string& v : kv::AuditVetoedStep(before, kv, paused, received)) report(v);
//
// Thread safety: read-only; call on the thread that owns the manager.
#ifndef LOCKSTEP_KVCACHE_AUDIT_H_
#define LOCKSTEP_KVCACHE_AUDIT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/kv_manager.h"

namespace lockstep::kv {

// One cache as it was.
struct CacheRecord {
  RequestId id;
  uint64_t generation = 0;
  int64_t history = 0;
  int64_t capacity = 0;
  std::vector<BlockId> blocks;
};

// Every pool of a manager as it was: block counts and every cache.
struct KvSnapshot {
  struct Pool {
    PoolKind kind = PoolKind::kTarget;
    PoolStats stats;
    std::vector<CacheRecord> caches;  // ascending id
  };
  std::vector<Pool> pools;  // target, then draft when it exists
};

KvSnapshot TakeSnapshot(const KvManager& kv);

// Growth never survives a veto (§7.4): after a vetoed step's rollback, every pool must
// be exactly as `before` (taken just before the step's schedule): the same caches with
// the same generation, capacity and block table, and the same used and reserved block
// counts. The only other changes a schedule may make are not growth: `paused` requests
// lost their caches (released, to be recomputed), and `received` requests got the
// caches their KV transfer writes into.
std::vector<std::string> AuditVetoedStep(const KvSnapshot& before, const KvManager& kv,
                                         absl::Span<const RequestId> paused,
                                         absl::Span<const RequestId> received);

// A step's growth is consumed by its forward (§7.4): no cache's capacity exceeds its
// history by more than `allowance(id, pool, generation)` tokens (what the batch in
// flight granted it, and what the caller's design keeps beyond history).
std::vector<std::string> AuditCapacities(
    const KvManager& kv, absl::FunctionRef<int64_t(RequestId, PoolKind, uint64_t)> allowance);

// The caches an owner holds, by identity: per pool (indexed by PoolKind) the generation
// of its cache, 0 when it holds none there.
struct CacheOwner {
  RequestId id;
  std::array<uint64_t, 2> generation{};
};

// Ownership by identity (§7.1, §7.6): every cache of an owner's id is the generation the
// owner holds, and every generation an owner holds is still live. (Caches whose id no
// owner has are KvManager::Audit's to report.)
std::vector<std::string> AuditOwnership(const KvManager& kv, absl::Span<const CacheOwner> owners);

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_AUDIT_H_

#include "kvcache/audit.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace lockstep::kv {
namespace {

std::vector<PoolKind> PoolsOf(const KvManager& kv) {
  if (kv.has_draft()) return {PoolKind::kTarget, PoolKind::kDraft};
  return {PoolKind::kTarget};
}

PoolStats StatsOf(const ManagerStats& stats, PoolKind pool) {
  return pool == PoolKind::kTarget ? stats.target : stats.draft.value_or(PoolStats());
}

std::string Who(PoolKind pool, RequestId id, uint64_t generation) {
  return absl::StrCat(PoolKindName(pool), " pool: request ", id.value(), " (generation ",
                      generation, ")");
}

}  // namespace

KvSnapshot TakeSnapshot(const KvManager& kv) {
  KvSnapshot snapshot;
  const ManagerStats stats = kv.Stats();
  for (const PoolKind kind : PoolsOf(kv)) {
    KvSnapshot::Pool& pool = snapshot.pools.emplace_back();
    pool.kind = kind;
    pool.stats = StatsOf(stats, kind);
    for (const RequestId id : kv.Ids(kind)) {
      const CacheInfo info = *kv.Info(id, kind);
      const absl::Span<const BlockId> blocks = kv.BlockTable(id, kind);
      pool.caches.push_back({id, info.generation, info.history, info.capacity,
                             std::vector<BlockId>(blocks.begin(), blocks.end())});
    }
  }
  return snapshot;
}

std::vector<std::string> AuditVetoedStep(const KvSnapshot& before, const KvManager& kv,
                                         absl::Span<const RequestId> paused,
                                         absl::Span<const RequestId> received) {
  const absl::flat_hash_set<RequestId> paused_ids(paused.begin(), paused.end());
  const absl::flat_hash_set<RequestId> received_ids(received.begin(), received.end());
  const ManagerStats stats = kv.Stats();
  std::vector<std::string> out;
  for (const KvSnapshot::Pool& pool : before.pools) {
    const char* name = PoolKindName(pool.kind);
    absl::flat_hash_map<RequestId, const CacheRecord*> was;
    // Blocks the pool must hold now: the unchanged tables of the caches that stayed,
    // plus those of this step's receives.
    absl::flat_hash_set<BlockId> expected_used;
    for (const CacheRecord& c : pool.caches) {
      was.emplace(c.id, &c);
      const std::optional<CacheInfo> now = kv.Info(c.id, pool.kind);
      if (!now.has_value()) {
        if (!paused_ids.contains(c.id)) {
          out.push_back(absl::StrCat(Who(pool.kind, c.id, c.generation),
                                     ": cache vanished in a vetoed step without a pause"));
        }
        continue;
      }
      if (now->generation != c.generation) {
        out.push_back(absl::StrCat(Who(pool.kind, c.id, c.generation),
                                   ": re-created as generation ", now->generation,
                                   " in a vetoed step"));
        continue;
      }
      const absl::Span<const BlockId> blocks = kv.BlockTable(c.id, pool.kind);
      if (now->capacity != c.capacity || now->history != c.history ||
          !std::equal(blocks.begin(), blocks.end(), c.blocks.begin(), c.blocks.end())) {
        out.push_back(absl::StrCat(Who(pool.kind, c.id, c.generation),
                                   ": growth survived the veto (capacity ", now->capacity,
                                   ", history ", now->history, ", ", blocks.size(),
                                   " blocks; before the schedule ", c.capacity, ", ", c.history,
                                   ", ", c.blocks.size(), ")"));
      }
      expected_used.insert(c.blocks.begin(), c.blocks.end());
    }
    for (const RequestId id : kv.Ids(pool.kind)) {
      const CacheInfo now = *kv.Info(id, pool.kind);
      auto it = was.find(id);
      if (it != was.end() && it->second->generation == now.generation) continue;
      if (received_ids.contains(id)) {
        const absl::Span<const BlockId> blocks = kv.BlockTable(id, pool.kind);
        expected_used.insert(blocks.begin(), blocks.end());
        continue;
      }
      if (it == was.end()) {
        out.push_back(absl::StrCat(Who(pool.kind, id, now.generation),
                                   ": cache created in a vetoed step survived it (capacity ",
                                   now.capacity, ")"));
      }
    }
    const PoolStats now = StatsOf(stats, pool.kind);
    if (now.used_blocks != static_cast<int64_t>(expected_used.size()) ||
        now.reserved_blocks != pool.stats.reserved_blocks) {
      out.push_back(absl::StrCat(name, " pool: after the veto ", now.used_blocks,
                                 " blocks used and ", now.reserved_blocks, " reserved; expected ",
                                 expected_used.size(), " and ", pool.stats.reserved_blocks,
                                 " (before the schedule ", pool.stats.used_blocks, " used, ",
                                 paused.size(), " paused, ", received.size(), " receives)"));
    }
  }
  return out;
}

std::vector<std::string> AuditCapacities(
    const KvManager& kv, absl::FunctionRef<int64_t(RequestId, PoolKind, uint64_t)> allowance) {
  std::vector<std::string> out;
  for (const PoolKind pool : PoolsOf(kv)) {
    for (const RequestId id : kv.Ids(pool)) {
      const CacheInfo c = *kv.Info(id, pool);
      const int64_t allowed = allowance(id, pool, c.generation);
      if (c.capacity > c.history + allowed) {
        out.push_back(absl::StrCat(Who(pool, id, c.generation), ": capacity ", c.capacity,
                                   " exceeds history ", c.history, " plus its grant ", allowed,
                                   " (growth not consumed by a forward)"));
      }
    }
  }
  return out;
}

std::vector<std::string> AuditOwnership(const KvManager& kv, absl::Span<const CacheOwner> owners) {
  std::vector<std::string> out;
  for (const CacheOwner& owner : owners) {
    for (const PoolKind pool : PoolsOf(kv)) {
      const uint64_t held = owner.generation[static_cast<size_t>(pool)];
      const std::optional<CacheInfo> c = kv.Info(owner.id, pool);
      if (c.has_value() && c->generation != held) {
        out.push_back(
            absl::StrCat(Who(pool, owner.id, c->generation), ": not the cache its owner holds (",
                         held == 0 ? std::string("none") : absl::StrCat("generation ", held), ")"));
      } else if (!c.has_value() && held != 0) {
        out.push_back(absl::StrCat(PoolKindName(pool), " pool: request ", owner.id.value(),
                                   " holds generation ", held, ", which is closed"));
      }
    }
  }
  return out;
}

}  // namespace lockstep::kv

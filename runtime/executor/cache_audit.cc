#include "runtime/executor/cache_audit.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/request.h"

namespace lockstep::exec {

void CacheAudit::Bind(const kv::KvManager& kv, RequestId id) {
  auto [it, added] = bindings_.try_emplace(id);
  CacheBinding& binding = it->second;
  if (added) binding.first_seen = bind_watermark_;
  for (const kv::PoolKind pool : {kv::PoolKind::kTarget, kv::PoolKind::kDraft}) {
    uint64_t& held = binding.generation[static_cast<size_t>(pool)];
    const std::optional<kv::CacheInfo> info = kv.Info(id, pool);
    if (!info.has_value()) {
      held = 0;  // released (a pause): the next cache is bound afresh
      continue;
    }
    if (held != 0) continue;  // another generation than `held` is the audit's to report
    if (info->generation < binding.first_seen) {
      step_violations_.push_back(absl::StrCat(
          kv::PoolKindName(pool), " pool: request ", id.value(), " (generation ", info->generation,
          "): cache predates its owner (generations from ", binding.first_seen, ")"));
    }
    held = info->generation;
  }
}

void CacheAudit::EndPass(const kv::KvManager& kv, size_t num_owners,
                         absl::FunctionRef<bool(RequestId)> is_owner) {
  if (bindings_.size() > num_owners) {
    absl::erase_if(bindings_, [&](const auto& entry) { return !is_owner(entry.first); });
  }
  bind_watermark_ = kv.next_generation();
}

void CacheAudit::AuditUnforwardedStep(int64_t step, const kv::KvSnapshot& before,
                                      const kv::KvManager& kv,
                                      const sched::ScheduleDecision& decision) {
  std::vector<RequestId> paused, received;
  for (const sched::Request* r : decision.paused) paused.push_back(r->id());
  for (const sched::Request* r : decision.transfer_receives) received.push_back(r->id());
  for (std::string& v : kv::AuditVetoedStep(before, kv, paused, received)) {
    step_violations_.push_back(absl::StrCat("step ", step, " (not forwarded): ", v));
  }
}

void CacheAudit::AppendViolations(
    const kv::KvManager& kv,
    absl::FunctionRef<int64_t(RequestId, kv::PoolKind, uint64_t)> allowance,
    std::vector<std::string>* out) const {
  std::vector<kv::CacheOwner> owners;
  owners.reserve(bindings_.size());
  for (const auto& [id, binding] : bindings_) owners.push_back({id, binding.generation});
  for (std::string& v : kv::AuditOwnership(kv, owners)) out->push_back(std::move(v));
  for (std::string& v : kv::AuditCapacities(kv, allowance)) out->push_back(std::move(v));
  out->insert(out->end(), step_violations_.begin(), step_violations_.end());
}

}  // namespace lockstep::exec

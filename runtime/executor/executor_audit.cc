// The executor's view of the invariant audit (docs/design.md §7, step 10): owners by cache
// identity, growth against the batch in flight, pools across a step that was not
// forwarded. Part of Executor; runs on the executor thread.
#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"

namespace lockstep::exec {

using sched::Request;
using sched::RequestState;

void Executor::BindCaches() {
  // An owner seen for the first time now appeared after the previous pass: a cache
  // issued before that pass cannot be its own (a predecessor's under the same id).
  auto bind = [&](RequestId id) {
    auto [it, added] = bindings_.try_emplace(id);
    CacheBinding& binding = it->second;
    if (added) binding.first_seen = bind_watermark_;
    for (const kv::PoolKind pool : {kv::PoolKind::kTarget, kv::PoolKind::kDraft}) {
      uint64_t& held = binding.generation[static_cast<size_t>(pool)];
      const std::optional<kv::CacheInfo> info = kv_->Info(id, pool);
      if (!info.has_value()) {
        held = 0;  // released (a pause): the next cache is bound afresh
        continue;
      }
      if (held != 0) continue;  // another generation than `held` is Audit's to report
      if (info->generation < binding.first_seen) {
        step_violations_.push_back(absl::StrCat(kv::PoolKindName(pool), " pool: request ",
                                                id.value(), " (generation ", info->generation,
                                                "): cache predates its owner (generations from ",
                                                binding.first_seen, ")"));
      }
      held = info->generation;
    }
  };
  for (const auto& r : active_) {
    if (!r->is_dummy()) bind(r->id());
  }
  for (const auto& [id, r] : claims_) bind(id);
  if (bindings_.size() > active_.size() + claims_.size()) {
    absl::erase_if(bindings_, [this](const auto& entry) {
      return Find(entry.first) == nullptr && !claims_.contains(entry.first);
    });
  }
  bind_watermark_ = kv_->next_generation();
}

void Executor::AuditUnforwardedStep(const kv::KvSnapshot& before,
                                    const sched::ScheduleDecision& decision) {
  std::vector<RequestId> paused, received;
  for (const Request* r : decision.paused) paused.push_back(r->id());
  for (const Request* r : decision.transfer_receives) received.push_back(r->id());
  for (std::string& v : kv::AuditVetoedStep(before, *kv_, paused, received)) {
    step_violations_.push_back(absl::StrCat("step ", step_, " (not forwarded): ", v));
  }
}

int64_t Executor::CapacityAllowance(RequestId id, kv::PoolKind pool, uint64_t generation) const {
  const bool target = pool == kv::PoolKind::kTarget;
  int64_t allowed = 0;
  if (in_flight_.has_value()) {
    for (const InFlightEntry& e : in_flight_->entries) {
      if (e.id == id && (target ? e.target_generation : e.draft_generation) == generation) {
        allowed += target ? e.target_grant : e.draft_grant;
      }
    }
  }
  // The draft model's proposals after a last context chunk stay in an unpaired mirror.
  if (!target && kv_->config().draft_mode == kv::DraftMode::kUnpaired) {
    allowed += config_.scheduler.speculative.num_draft_tokens;
  }
  // A receive's cache holds the prompt before its KV (history) arrives.
  if (const Request* r = Find(id);
      r != nullptr && (r->state() == RequestState::kGenInit ||
                       r->state() == RequestState::kGenTransferInProgress)) {
    allowed = std::max<int64_t>(allowed, static_cast<int64_t>(r->prompt().size()));
  }
  return allowed;
}

std::vector<std::string> Executor::Audit() const {
  std::vector<std::string> out = kv_->Audit(LiveIds(), ClaimedIds(), dummy_ != nullptr);
  std::vector<kv::CacheOwner> owners;
  owners.reserve(bindings_.size());
  for (const auto& [id, binding] : bindings_) owners.push_back({id, binding.generation});
  for (std::string& v : kv::AuditOwnership(*kv_, owners)) out.push_back(std::move(v));
  for (std::string& v :
       kv::AuditCapacities(*kv_, [this](RequestId id, kv::PoolKind pool, uint64_t generation) {
         return CapacityAllowance(id, pool, generation);
       })) {
    out.push_back(std::move(v));
  }
  out.insert(out.end(), step_violations_.begin(), step_violations_.end());
  if (dummy_ != nullptr) out.push_back("a pad dummy survived the end of its step");
  for (const auto& r : active_) {
    const bool has_cache = kv_->Has(r->id(), kv::PoolKind::kTarget);
    if (r->finished()) {
      out.push_back(absl::StrCat(r->DebugString(), " is finished but still active"));
    }
    if (r->state() == RequestState::kGenTransferInProgress && !has_cache) {
      out.push_back(absl::StrCat(r->DebugString(), " receives KV into no cache"));
    }
    if ((r->state() == RequestState::kGenerationInProgress ||
         r->state() == RequestState::kGenerationToComplete) &&
        !has_cache) {
      out.push_back(absl::StrCat(r->DebugString(), " decodes without a cache"));
    }
  }
  for (const auto& [id, r] : claims_) {
    if (!kv_->Has(id, kv::PoolKind::kTarget)) {
      out.push_back(absl::StrCat("claimed request ", id.value(), " has no cache to send"));
    }
  }
  return out;
}

std::vector<std::string> Executor::DescribeRequests() const {
  std::vector<std::string> out;
  for (const auto& r : active_) {
    std::string line = r->DebugString();
    if (const auto info = kv_->Info(r->id(), kv::PoolKind::kTarget)) {
      absl::StrAppend(&line, " kv[gen ", info->generation, " hist ", info->history, " cap ",
                      info->capacity, "]");
    }
    out.push_back(std::move(line));
  }
  for (const auto& [id, r] : claims_) out.push_back(absl::StrCat("claimed ", r->DebugString()));
  absl::StrAppend(&out.emplace_back(), "queued ", queue_.size(), ", free blocks ",
                  kv_->Stats().target.free_blocks);
  return out;
}

}  // namespace lockstep::exec

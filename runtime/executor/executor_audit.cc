// The executor's side of the invariant audit (docs/design.md §7, step 10): which owners
// CacheAudit binds, growth against the batch in flight, requests in impossible states.
// The audit's own state is CacheAudit's (cache_audit.h). Part of Executor; runs on the
// executor thread.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/executor/executor.h"

namespace lockstep::exec {

using sched::Request;
using sched::RequestState;

void Executor::BindCaches() {
  for (const auto& r : active_) {
    if (!r->is_dummy()) audit_.Bind(*kv_, r->id());
  }
  for (const auto& [id, r] : claims_) audit_.Bind(*kv_, id);
  audit_.EndPass(*kv_, active_.size() + claims_.size(),
                 [this](RequestId id) { return Find(id) != nullptr || claims_.contains(id); });
}

int64_t Executor::CapacityAllowance(RequestId id, kv::PoolKind pool, uint64_t generation) const {
  const bool target = pool == kv::PoolKind::kTarget;
  int64_t allowed = in_flight_.Granted(id, pool, generation);
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
  audit_.AppendViolations(
      *kv_,
      [this](RequestId id, kv::PoolKind pool, uint64_t generation) {
        return CapacityAllowance(id, pool, generation);
      },
      &out);
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

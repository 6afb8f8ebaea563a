// Disaggregated KV transfer as the executor drives it (docs/design.md §3 step 2, §4):
// receives on generation instances, sends under transfer claims on context instances.
// Part of Executor; runs on the executor thread; never blocks on the network.
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "runtime/executor/executor.h"

namespace lockstep::exec {

using sched::Request;
using sched::RequestState;

void Executor::QueueReceives(const sched::ScheduleDecision& decision) {
  for (Request* r : decision.transfer_receives) pending_receives_.emplace_back(r->id(), step_);
}

void Executor::StartReadyReceives() {
  // Every batch launched before step `allocated` must have been collected: only then
  // is no engine thread still writing blocks that were freed and handed to a receive.
  // (The batch in flight now, if any, was launched at or after that step when the
  // previous batch was processed; a deferred batch is older and holds them back.)
  const int64_t oldest_running = in_flight_.OldestRunningStep(step_ + 1);
  std::vector<std::pair<RequestId, int64_t>> waiting;
  for (const auto& [id, allocated] : pending_receives_) {
    Request* r = Find(id);
    if (r == nullptr || r->state() != RequestState::kGenInit) continue;  // cancelled, failed
    if (oldest_running < allocated) {
      waiting.emplace_back(id, allocated);
      continue;
    }
    if (transceiver_ == nullptr) {
      FailRequest(r,
                  absl::FailedPreconditionError(
                      "generation-only request on an instance without KV transfer"),
                  /*transfer=*/true);
      continue;
    }
    const sched::ContextSource& source = *r->context_source();
    transfer::ReceiveSpec spec;
    spec.blocks = kv_->BlockRefsOf(r->id());
    spec.num_tokens = static_cast<int64_t>(r->prompt().size());
    spec.source.instance = source.instance;
    spec.source.rank = source.rank;
    spec.source.address = source.address;
    spec.source.request_id = source.remote_id;
    spec.source.lease_expiry = source.lease_expiry;
    spec.deadline = r->transfer_deadline();
    const absl::Status started = transceiver_->StartReceive(spec);
    if (!started.ok()) {
      FailRequest(r,
                  absl::Status(started.code(),
                               absl::StrCat("KV receive from ", source.instance, " rank ",
                                            source.rank, " could not start: ", started.message())),
                  /*transfer=*/true);
      continue;
    }
    r->TransitionTo(RequestState::kGenTransferInProgress);
    receive_started_[r->id()] = clock_->Now();
  }
  pending_receives_ = std::move(waiting);
}

void Executor::StartSend(Request* request) {
  absl::Status started =
      absl::FailedPreconditionError("the instance has no KV transfer configured");
  if (transceiver_ != nullptr) {
    transfer::SendSpec spec;
    spec.blocks = kv_->BlockRefsOf(request->id());
    spec.num_tokens = static_cast<int64_t>(request->prompt().size());
    spec.lease_expiry = clock_->Now() + config_.claim_lease;
    // Prefix blocks the host KV tier holds are read from there (kvcache/tier_pins.h);
    // the pins go with the cache, released once the claim ends. The request's prefix
    // keys name them (without prefix reuse there are none, and nothing to pin).
    absl::StatusOr<std::shared_ptr<const kv::HostBlocks>> host =
        kv_->PinHostBlocks(request->id(), request->prompt(), request->prefix_keys());
    if (host.ok()) spec.host_blocks = *std::move(host);
    started = transceiver_->StartSend(spec);
  }
  if (started.ok()) {
    request->TransitionTo(RequestState::kCtxTransferInProgress);
    return;
  }
  // Not FailRequest: the caller's response for this step carries the error, and a
  // second final response would answer the request twice. No claim was taken, so the
  // KV is released when the request terminates after that response.
  absl::Status failed(started.code(), absl::StrCat("KV send of request ", request->id().value(),
                                                   " could not start: ", started.message()));
  LOCKSTEP_LOG_WARN("exec", "request {} failed: {}", request->id(), failed.ToString());
  request->Finish(sched::FinishReason::kError, std::move(failed), clock_->Now(),
                  /*transfer=*/true);
  ++errors_since_vote_;
  ++counters_.failed;
  ++counters_.transfer_failures;
}

void Executor::PollTransfers() {
  if (transceiver_ == nullptr) return;
  const absl::Time now = clock_->Now();
  for (const transfer::TransferEvent& event : transceiver_->Poll()) {
    if (event.kind == transfer::TransferKind::kSend) {
      auto it = claims_.find(event.id);
      if (it == claims_.end()) continue;
      if (event.status.ok()) {
        ++counters_.transfers_sent;
      } else {
        ++counters_.transfer_failures;
        LOCKSTEP_LOG_WARN("exec", "KV send of request {} ended: {}", event.id,
                          event.status.ToString());
      }
      Release(event.id);  // the claim ends: the blocks go back (once)
      claims_.erase(it);
      continue;
    }
    absl::Time started = now;
    if (auto it = receive_started_.find(event.id); it != receive_started_.end()) {
      started = it->second;
      receive_started_.erase(it);
    }
    Request* r = Find(event.id);
    if (r == nullptr || r->state() != RequestState::kGenTransferInProgress) continue;
    auto cancel = cancelling_.find(event.id);
    if (cancel != cancelling_.end()) {
      const PendingCancel pending = cancel->second;
      cancelling_.erase(cancel);
      if (absl::IsCancelled(pending.why)) {
        r->Finish(sched::FinishReason::kCancelled, pending.why, now);
        EmitResponse(r);
        ++counters_.cancelled;
      } else if (pending.pull_late) {
        FailPull(r, pending.why);
      } else {
        FailRequest(r, pending.why, /*transfer=*/true);
      }
      continue;
    }
    if (!event.status.ok()) {
      // The pull itself failed (the context rank is gone, refused or lost the claim,
      // or the data did not arrive intact): the router may retry elsewhere.
      const sched::ContextSource& source = *r->context_source();
      FailPull(r, absl::Status(event.status.code(),
                               absl::StrCat("KV transfer from ", source.instance, " rank ",
                                            source.rank, " failed: ", event.status.message())));
      continue;
    }
    const int64_t prompt = static_cast<int64_t>(r->prompt().size());
    bool ok = kv_->Resize(r->id(), kv::PoolKind::kTarget, std::nullopt, prompt).ok();
    if (ok && kv_->config().draft_mode == kv::DraftMode::kUnpaired &&
        kv_->Has(r->id(), kv::PoolKind::kDraft)) {
      ok = kv_->Resize(r->id(), kv::PoolKind::kDraft, std::nullopt, prompt).ok();
    }
    if (!ok) {
      FailRequest(r, absl::InternalError("received KV does not fit the allocated cache"),
                  /*transfer=*/true);
      continue;
    }
    r->TransitionTo(RequestState::kGenTransferComplete);
    ++counters_.transfers_received;
    counters_.kv_receive_micros += absl::ToInt64Microseconds(now - started);
    for (kv::PoolKind pool : {kv::PoolKind::kTarget, kv::PoolKind::kDraft}) {
      if (!kv_->Has(r->id(), pool)) continue;
      const kv::BlockLayout& layout = kv_->layout(pool);
      counters_.kv_bytes_received +=
          layout.BlocksFor(prompt) * static_cast<int64_t>(layout.BlockBytes());
    }
  }
  // Receives past their deadline: cancel, then fail when the transceiver confirms.
  for (const auto& r : active_) {
    if (r->state() != RequestState::kGenTransferInProgress || now < r->transfer_deadline() ||
        cancelling_.contains(r->id())) {
      continue;
    }
    const sched::ContextSource& source = *r->context_source();
    cancelling_.emplace(
        r->id(), PendingCancel{absl::DeadlineExceededError(
                                   absl::StrCat("KV transfer from ", source.instance, " rank ",
                                                source.rank, " did not complete within ",
                                                absl::FormatDuration(config_.transfer_deadline))),
                               /*pull_late=*/true});
    transceiver_->Cancel(r->id());
  }
}

}  // namespace lockstep::exec

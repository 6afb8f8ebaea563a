#include "runtime/worker/kv_event_publisher.h"

#include <algorithm>
#include <utility>

namespace lockstep::worker {

KvEventPublisher::KvEventPublisher(Options options)
    : options_(std::move(options)), ranks_(static_cast<size_t>(std::max(1, options_.world_size))) {}

void KvEventPublisher::MarkForSnapshot(int32_t rank) {
  if (rank < 0 || rank >= static_cast<int32_t>(ranks_.size())) return;
  RankState& state = ranks_[static_cast<size_t>(rank)];
  state.needs_snapshot = true;
  for (const v1::KvEventBatch& batch : state.pending) {
    pending_keys_ -= static_cast<size_t>(batch.committed_size() + batch.evicted_size() +
                                         batch.host_stored_size() + batch.host_removed_size() +
                                         batch.disk_stored_size() + batch.disk_removed_size());
  }
  state.pending.clear();  // the snapshot covers them
}

void KvEventPublisher::OnKvEvents(absl::Span<const kv::KvEventDelta> per_rank) {
  absl::MutexLock lock(&mu_);
  for (size_t r = 0; r < per_rank.size() && r < ranks_.size(); ++r) {
    const kv::KvEventDelta& delta = per_rank[r];
    if (delta.empty()) continue;
    RankState& state = ranks_[r];
    for (uint64_t key : delta.evicted) state.keys.erase(key);
    state.keys.insert(delta.committed.begin(), delta.committed.end());
    for (uint64_t key : delta.host.removed) state.host_keys.erase(key);
    state.host_keys.insert(delta.host.stored.begin(), delta.host.stored.end());
    for (uint64_t key : delta.disk.removed) state.disk_keys.erase(key);
    state.disk_keys.insert(delta.disk.stored.begin(), delta.disk.stored.end());
    ++state.seq;
    if (state.needs_snapshot) continue;
    v1::KvEventBatch& batch = state.pending.emplace_back();
    batch.set_rank(static_cast<int32_t>(r));
    batch.set_seq(state.seq);
    batch.mutable_committed()->Assign(delta.committed.begin(), delta.committed.end());
    batch.mutable_evicted()->Assign(delta.evicted.begin(), delta.evicted.end());
    batch.mutable_host_stored()->Assign(delta.host.stored.begin(), delta.host.stored.end());
    batch.mutable_host_removed()->Assign(delta.host.removed.begin(), delta.host.removed.end());
    batch.mutable_disk_stored()->Assign(delta.disk.stored.begin(), delta.disk.stored.end());
    batch.mutable_disk_removed()->Assign(delta.disk.removed.begin(), delta.disk.removed.end());
    pending_keys_ += delta.committed.size() + delta.evicted.size() + delta.host.stored.size() +
                     delta.host.removed.size() + delta.disk.stored.size() +
                     delta.disk.removed.size();
  }
  if (pending_keys_ > options_.max_pending_keys) {
    for (size_t r = 0; r < ranks_.size(); ++r) MarkForSnapshot(static_cast<int32_t>(r));
  }
}

std::optional<v1::ReportKvEventsRequest> KvEventPublisher::TakeReport() {
  absl::MutexLock lock(&mu_);
  v1::ReportKvEventsRequest report;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    RankState& state = ranks_[r];
    if (state.needs_snapshot) {
      v1::KvEventSnapshot* snapshot = report.add_snapshots();
      snapshot->set_rank(static_cast<int32_t>(r));
      snapshot->set_seq(state.seq);
      snapshot->mutable_keys()->Reserve(static_cast<int>(state.keys.size()));
      for (uint64_t key : state.keys) snapshot->add_keys(key);
      snapshot->mutable_host_keys()->Assign(state.host_keys.begin(), state.host_keys.end());
      snapshot->mutable_disk_keys()->Assign(state.disk_keys.begin(), state.disk_keys.end());
      state.needs_snapshot = false;
      continue;
    }
    for (v1::KvEventBatch& batch : state.pending) *report.add_batches() = std::move(batch);
    state.pending.clear();
  }
  pending_keys_ = 0;
  if (report.snapshots_size() == 0 && report.batches_size() == 0) return std::nullopt;
  report.set_instance(options_.instance);
  report.set_incarnation(options_.incarnation);
  report.set_world_size(options_.world_size);
  report.set_hash_salt(options_.hash_salt);
  report.set_tokens_per_block(options_.tokens_per_block);
  return report;
}

void KvEventPublisher::OnResponse(const v1::ReportKvEventsResponse& response) {
  absl::MutexLock lock(&mu_);
  for (int32_t rank : response.snapshot_ranks()) MarkForSnapshot(rank);
}

void KvEventPublisher::OnSendFailed(const v1::ReportKvEventsRequest& report) {
  absl::MutexLock lock(&mu_);
  for (const v1::KvEventSnapshot& snapshot : report.snapshots()) MarkForSnapshot(snapshot.rank());
  for (const v1::KvEventBatch& batch : report.batches()) MarkForSnapshot(batch.rank());
}

uint64_t KvEventPublisher::seq(int32_t rank) const {
  absl::MutexLock lock(&mu_);
  return rank >= 0 && rank < static_cast<int32_t>(ranks_.size())
             ? ranks_[static_cast<size_t>(rank)].seq
             : 0;
}

}  // namespace lockstep::worker

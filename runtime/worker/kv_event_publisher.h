// KvEventPublisher: the leader's side of KV events (kv_aware routing). The executor
// hands it every rank's coalesced delta of a step (kvcache/kv_events.h); it numbers
// them per rank into batches (1, 2, ... within this incarnation), keeps a mirror of
// each rank's key set per tier (device, host, disk), and builds the reports the worker's KV event thread sends to
// the router (RouterService.ReportKvEvents).
//
// Snapshots come from the mirror, so no rank but the leader takes part: the gather
// delivers every delta in order, and the mirror is each rank's tree as of its last
// batch. A rank gets a snapshot instead of its pending batches when the router asks
// (it found a gap, or does not know the incarnation), when a report carrying its
// batches failed, or when more than `max_pending_keys` keys wait (the router is away).
//
// Thread safety: thread-safe; OnKvEvents is called on the executor thread (cheap, never
// blocks on I/O), the rest on the sending thread.
#ifndef LOCKSTEP_RUNTIME_WORKER_KV_EVENT_PUBLISHER_H_
#define LOCKSTEP_RUNTIME_WORKER_KV_EVENT_PUBLISHER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "kvcache/kv_events.h"
#include "proto/router.pb.h"

namespace lockstep::worker {

class KvEventPublisher final : public kv::KvEventSink {
 public:
  struct Options {
    std::string instance;
    int32_t world_size = 1;
    uint64_t incarnation = 1;  // > 0
    uint64_t hash_salt = 0;    // the target pool's reuse salt
    int32_t tokens_per_block = 16;
    size_t max_pending_keys = 1 << 20;
  };
  explicit KvEventPublisher(Options options);

  void OnKvEvents(absl::Span<const kv::KvEventDelta> per_rank) override ABSL_LOCKS_EXCLUDED(mu_);

  // The next report: snapshots of the ranks that need one, then every batch not sent
  // yet; nullopt when there is nothing to send.
  std::optional<v1::ReportKvEventsRequest> TakeReport() ABSL_LOCKS_EXCLUDED(mu_);
  // The router's answer to a report.
  void OnResponse(const v1::ReportKvEventsResponse& response) ABSL_LOCKS_EXCLUDED(mu_);
  // `report` was not delivered: its ranks send snapshots next.
  void OnSendFailed(const v1::ReportKvEventsRequest& report) ABSL_LOCKS_EXCLUDED(mu_);

  // Batches numbered so far for `rank` (tests).
  uint64_t seq(int32_t rank) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct RankState {
    uint64_t seq = 0;  // last batch numbered
    absl::flat_hash_set<uint64_t> keys;  // the device tier
    absl::flat_hash_set<uint64_t> host_keys;
    absl::flat_hash_set<uint64_t> disk_keys;
    std::vector<v1::KvEventBatch> pending;
    bool needs_snapshot = false;
  };
  void MarkForSnapshot(int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::vector<RankState> ranks_ ABSL_GUARDED_BY(mu_);
  size_t pending_keys_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_KV_EVENT_PUBLISHER_H_

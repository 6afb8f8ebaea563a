// The generation side's receives: a fixed set of threads that run KvPuller pulls, at
// most one per thread, in the order they were started; receives beyond the threads
// wait in a queue. Each receive ends with exactly one kReceive event: its outcome, or
// kCancelled after Cancel — pushed only once the pull has returned, so no thread
// writes its blocks any more.
//
// Thread safety: thread-safe. Start and Cancel are called by the executor thread and
// never block on the network.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_RECEIVE_WORKERS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_RECEIVE_WORKERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/transfer/data_connections.h"
#include "runtime/transfer/event_queue.h"
#include "runtime/transfer/kv_puller.h"
#include "runtime/transfer/raw_pull.h"
#include "runtime/transfer/ucx_puller.h"

namespace lockstep::transfer {

class ReceiveWorkers {
 public:
  // With `pull_over_tcp`, a pull goes over the context rank's TCP data plane when it
  // has one (data_connections.h), else over gRPC. It also goes over gRPC when the data
  // plane cannot be asked, reached or entered, or closes a fresh connection before
  // answering (a full or flooded data plane, tcp_data_server.h): gRPC then reports the
  // peer's own error if it is down.
  //
  // With `ucx` (built on `puller`), a pull first asks the context rank for a UCX offer
  // (ucx_puller.h) and goes on as above only where the peer has no UCX data plane or
  // refuses the offer (the claim untouched).
  ReceiveWorkers(int num_threads, std::unique_ptr<KvPuller> puller,
                 std::shared_ptr<EventQueue> events, bool pull_over_tcp = true,
                 std::unique_ptr<UcxPuller> ucx = nullptr);
  ~ReceiveWorkers();  // Shutdown()
  ReceiveWorkers(const ReceiveWorkers&) = delete;
  ReceiveWorkers& operator=(const ReceiveWorkers&) = delete;

  // Queues the receive `spec`, to finish by `spec.deadline`, here in real time.
  // AlreadyExists while `spec.blocks.id` has a receive; Unavailable after Shutdown.
  absl::Status Start(const ReceiveSpec& spec) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the receive of `id` with kCancelled: at once if it is queued, else when its
  // pull has stopped. No-op for an unknown id.
  void Cancel(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels every receive (their events are dropped), joins the threads, then sends the
  // UCX Releases still deferred (UcxPuller::DeferRelease).
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Receives started and not yet ended.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  // Pulls that went over a TCP data plane, and over gRPC (each pull counts once);
  // of the latter, those that fell back from a data plane that refused them.
  int64_t pulls_over_tcp() const { return pulls_over_tcp_.load(); }
  int64_t pulls_over_grpc() const { return pulls_over_grpc_.load(); }
  int64_t pulls_fallen_back() const { return pulls_fallen_back_.load(); }
  // Pulls that went over UCX, and those that fell back from UCX to the others.
  int64_t pulls_over_ucx() const { return pulls_over_ucx_.load(); }
  int64_t ucx_fallbacks() const { return ucx_fallbacks_.load(); }

 private:
  struct Receive {
    ReceiveSpec spec;                      // deadline in real time
    std::shared_ptr<PullControl> control;  // set while running
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One pull, over the data plane or gRPC.
  // `release_offer`: set where a UCX offer's staged copy is to be released (after the
  // receive is reported).
  absl::Status Pull(const ReceiveSpec& spec, PullControl& control,
                    std::optional<uint64_t>* release_offer) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a fallback to gRPC from `address`'s data plane (`why`); logs the first per peer.
  // Sends the UCX puller's deferred Releases (UcxPuller::ReleaseDeferred): all, or
  // those due.
  void ReleaseDeferred(bool due_only = false) ABSL_LOCKS_EXCLUDED(mu_);
  void NoteFallback(const std::string& address, const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // The stub for `address` (one channel per context rank, kept for reuse).
  RawPullStub& StubFor(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // The UCX control stub for `address`, on the same channel.
  lockstep::v1::KvUcxService::Stub& UcxStubFor(const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<KvPuller> puller_;
  const std::unique_ptr<UcxPuller> ucx_;  // null: no UCX; references *puller_
  const std::shared_ptr<EventQueue> events_;
  const bool pull_over_tcp_;
  std::atomic<int64_t> pulls_over_tcp_{0};
  std::atomic<int64_t> pulls_over_grpc_{0};
  std::atomic<int64_t> pulls_fallen_back_{0};
  std::atomic<int64_t> pulls_over_ucx_{0};
  std::atomic<int64_t> ucx_fallbacks_{0};
  DataConnections connections_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RequestId, Receive> receives_ ABSL_GUARDED_BY(mu_);
  std::deque<RequestId> queue_ ABSL_GUARDED_BY(mu_);  // queued, not running
  absl::flat_hash_map<std::string, std::unique_ptr<RawPullStub>> stubs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<lockstep::v1::KvUcxService::Stub>> ucx_stubs_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> ucx_fallbacks_logged_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> fallbacks_logged_ ABSL_GUARDED_BY(mu_);  // peer addresses
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_RECEIVE_WORKERS_H_

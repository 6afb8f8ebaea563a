// The context side's transfer claims (docs/design.md §7.8): the blocks of finished context
// requests offered to the generation rank that will pull them.
//
// A claim ends exactly once, with one kSend event:
//  * no pull: Cancel (kCancelled), or the lease expires (kDeadlineExceeded; checked by
//    ExpireLeases, and by BeginPull so that an expired claim is never served);
//  * a pull began: when the pull is over AND nothing references the blocks any more —
//    the serving thread's ActivePull and every gRPC slice that points into the KV slab
//    hold it — with the serving thread's outcome, or with the reason it was aborted
//    (Cancel: kCancelled; lease expiry: kDeadlineExceeded; Shutdown: kUnavailable).
// So when the executor polls the event, no thread and no socket write reads the blocks.
//
// Thread safety: thread-safe. Add, Cancel and ExpireLeases are called by the executor
// thread, BeginPull by gRPC server threads; the last reference to an ActivePull may be
// dropped on any thread. No gRPC call is made while a lock of this file is held, except
// ServerContext::TryCancel under the ActivePull's own lock (which gRPC never calls back
// into).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_SEND_CLAIMS_H_
#define LOCKSTEP_RUNTIME_TRANSFER_SEND_CLAIMS_H_

#include <cstddef>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "grpcpp/server_context.h"
#include "runtime/transfer/event_queue.h"
#include "runtime/transfer/transceiver.h"

namespace lockstep::transfer {

class SendClaims;

// One running pull of a claim. The serving thread owns one reference; gRPC slices that
// reference the claim's blocks own the others (see chunk_codec.h).
class ActivePull {
 public:
  ~ActivePull();
  ActivePull(const ActivePull&) = delete;
  ActivePull& operator=(const ActivePull&) = delete;

  const SendSpec& spec() const { return spec_; }

  // Notified when the pull must stop; aborted() then says why.
  const absl::Notification& abort_signal() const { return abort_signal_; }
  std::optional<absl::Status> aborted() const ABSL_LOCKS_EXCLUDED(mu_);

  // The serving thread's outcome; the first call counts. A pull that never calls it
  // ends with kInternal.
  void Finish(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // The serving thread calls this before its handler returns: the ServerContext is no
  // longer valid, so an abort no longer cancels the call.
  void DetachContext() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class SendClaims;
  ActivePull(std::shared_ptr<SendClaims> claims, SendSpec spec, grpc::ServerContext* context);

  // Records `why` (first reason wins), notifies, and cancels the call if attached.
  void Abort(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<SendClaims> claims_;
  const SendSpec spec_;
  absl::Notification abort_signal_;
  mutable absl::Mutex mu_;
  grpc::ServerContext* context_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> abort_reason_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> finished_ ABSL_GUARDED_BY(mu_);
};

class SendClaims : public std::enable_shared_from_this<SendClaims> {
 public:
  // `clock` (the executor's) and `events` must outlive every ActivePull.
  static std::shared_ptr<SendClaims> Create(Clock* clock, std::shared_ptr<EventQueue> events);

  // Offers `spec.blocks` until `spec.lease_expiry`. AlreadyExists when the id already
  // has a claim; Unavailable after Shutdown.
  absl::Status Add(const SendSpec& spec) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts the pull of the claim of `id`, served under `context`. NotFound when there
  // is no claim (unknown, ended, or its lease has expired — which ends it now);
  // AlreadyExists while another pull of it runs; Unavailable after Shutdown.
  absl::StatusOr<std::shared_ptr<ActivePull>> BeginPull(RequestId id, grpc::ServerContext* context)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the claim of `id` with kCancelled: now if no pull runs, else by aborting the
  // pull. No-op for an unknown id.
  void Cancel(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends (or aborts the pull of) every claim whose lease expired at `now`.
  void ExpireLeases(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Aborts every running pull with Unavailable and refuses new claims and pulls.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Claims not yet ended.
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class ActivePull;
  struct Claim {
    SendSpec spec;
    std::weak_ptr<ActivePull> pull;  // set while a pull holds the claim
    bool pulling = false;
  };

  SendClaims(Clock* clock, std::shared_ptr<EventQueue> events);
  // Called once per ActivePull, when its last reference goes.
  void EndPull(RequestId id, uint64_t generation, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Aborts `pulls` outside the lock (they may be the last references).
  static void AbortAll(std::vector<std::shared_ptr<ActivePull>> pulls, const absl::Status& why);

  Clock* const clock_;
  const std::shared_ptr<EventQueue> events_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RequestId, Claim> claims_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_SEND_CLAIMS_H_

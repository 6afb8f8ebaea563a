// The client requests a router has in flight ("flows"), so that other threads can end
// them: the health monitor cancels the flows running on an instance that became
// unhealthy, and the sweeper cancels flows whose client disconnected.
//
// A FlowHandle is shared by the thread running the flow (which registers the gRPC
// call of the leg now running) and the threads that may cancel it. Cancelling records
// the first reason and cancels the running call; the flow thread then sees the call
// fail and reports `cancel_reason()`. An unhealthy instance ends only the leg running
// on it (`leg_failure()`): the flow may go on elsewhere (request migration).
//
// Thread safety: both classes are thread-safe. The only callback, `client_connected`,
// runs under a lock of its own flow (`callback_mu_`) that nothing else takes but
// Detach, which waits for a running callback so that none runs once the flow's thread
// has moved on (the callback refers to objects of that thread, e.g. its HTTP sink).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_FLOW_TRACKER_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_FLOW_TRACKER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"

namespace lockstep::router {

class FlowHandle {
 public:
  // `client_connected` is polled by the sweeper thread; it must be thread-safe.
  FlowHandle(uint64_t request_id, std::function<bool()> client_connected)
      : request_id_(request_id), client_connected_(std::move(client_connected)) {}

  uint64_t request_id() const { return request_id_; }

  // Flow thread: `call` (owned by the flow thread, alive until EndLeg) now runs on
  // `instance`. Returns false, registering nothing, when the flow is already cancelled.
  bool BeginLeg(const std::string& instance, grpc::ClientContext* call) ABSL_LOCKS_EXCLUDED(mu_);
  // The same for a call of gRPC's callback API, shared with the flow: it is cancelled
  // outside the flow's lock (TryCancel may run the call's reactions on the cancelling
  // thread, and they end the leg).
  bool BeginLeg(const std::string& instance, std::shared_ptr<grpc::ClientContext> call)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EndLeg() ABSL_LOCKS_EXCLUDED(mu_);

  // Any thread: ends the flow with `reason` (the first reason wins).
  void Cancel(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Any thread: ends the running leg with `reason` if it runs on `instance` (the first
  // reason of the leg wins); returns whether it did. The flow itself is not cancelled.
  bool CancelLeg(const std::string& instance, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Why the current (or, after EndLeg, the last) leg was ended by CancelLeg; OK if it
  // was not. BeginLeg clears it.
  absl::Status leg_failure() const ABSL_LOCKS_EXCLUDED(mu_);

  // OK while not cancelled.
  absl::Status cancel_reason() const ABSL_LOCKS_EXCLUDED(mu_);
  // The instance of the leg now running ("" between legs).
  std::string instance() const ABSL_LOCKS_EXCLUDED(mu_);

  // Sweeper thread: polls `client_connected` (true once detached).
  bool ClientConnected() ABSL_LOCKS_EXCLUDED(callback_mu_);
  // Flow thread, before the objects the callback uses go away: no callback runs after
  // this returns.
  void Detach() ABSL_LOCKS_EXCLUDED(callback_mu_);

 private:
  const uint64_t request_id_;
  const std::function<bool()> client_connected_;
  mutable absl::Mutex mu_;
  std::string instance_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<grpc::ClientContext> shared_call_ ABSL_GUARDED_BY(mu_);  // owns call_ if set
  absl::Status cancel_reason_ ABSL_GUARDED_BY(mu_);
  absl::Status leg_failure_ ABSL_GUARDED_BY(mu_);
  absl::Mutex callback_mu_;
  bool detached_ ABSL_GUARDED_BY(callback_mu_) = false;
};

class FlowTracker {
 public:
  void Add(std::shared_ptr<FlowHandle> flow) ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(uint64_t request_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the legs running on `instance` (FlowHandle::CancelLeg); returns how many.
  int CancelOnInstance(const std::string& instance, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the flows whose client is gone; returns how many.
  int CancelDisconnected() ABSL_LOCKS_EXCLUDED(mu_);
  // Shutdown: cancels every flow, and every flow added from now on, with `reason`.
  void Close(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  std::vector<std::shared_ptr<FlowHandle>> Flows() const ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<FlowHandle>> flows_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);  // non-OK once closed
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_FLOW_TRACKER_H_

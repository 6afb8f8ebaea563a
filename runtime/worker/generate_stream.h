// GenerateStream: one WorkerService.Generate call as a gRPC callback reactor. Nothing
// waits for its responses: a push to the request's ResponseQueue wakes the stream (the
// pushing executor thread only queues the wake-up on a WakePool), which writes what is
// queued (one write in flight at a time), and the request and cancel deadlines are
// DeadlineTimers callbacks. Many streams thus share gRPC's few callback threads, the
// wake pool's and one timer thread.
//
// Contracts (as the former blocking handler's): the stream ends OK after the request's
// final response. A client that cancels, or stops taking writes, has its request
// cancelled in the instance; so has a request not finished within `request_timeout` of
// the injected Clock. After such a cancel nothing more is written, and the stream ends
// at the final response or, at the latest, `cancel_grace` later (CANCELLED if the
// client cancelled, else DEADLINE_EXCEEDED), closing the request's stream.
//
// Ownership: gRPC holds the reactor from Start until OnDone; the stream keeps itself
// alive until then. Thread safety: its reactions and wake-ups may run on any thread.
#ifndef LOCKSTEP_RUNTIME_WORKER_GENERATE_STREAM_H_
#define LOCKSTEP_RUNTIME_WORKER_GENERATE_STREAM_H_

#include <atomic>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/ids.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/executor/executor.h"
#include "runtime/worker/deadline_timers.h"
#include "runtime/worker/request_streams.h"
#include "runtime/worker/wake_pool.h"

namespace lockstep::worker {

struct GenerateStreamDeps {
  Clock* clock = nullptr;
  exec::Executor* executor = nullptr;  // inbox() and spec_method() only
  RequestStreams* streams = nullptr;
  DeadlineTimers* timers = nullptr;
  WakePool* wake = nullptr;  // where pushes wake the stream
  absl::Duration request_timeout = absl::Minutes(10);
  absl::Duration cancel_grace = absl::Seconds(5);
};

class GenerateStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  // Streams request `id`, whose queue is open and whose request is in the inbox. Sends
  // the initial metadata at once (the client then knows the worker took the request).
  static grpc::ServerWriteReactor<v1::GenerateResponse>* Start(
      const GenerateStreamDeps& deps, grpc::CallbackServerContext* context, RequestId id,
      std::shared_ptr<ResponseQueue> queue);

  // A stream that only ends with `status` (a refused request).
  static grpc::ServerWriteReactor<v1::GenerateResponse>* Refuse(grpc::Status status);

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  GenerateStream(const GenerateStreamDeps& deps, grpc::CallbackServerContext* context,
                 RequestId id, std::shared_ptr<ResponseQueue> queue);

  // Writes or finishes with what is queued, unless a write is in flight or it finished.
  void Pump() ABSL_LOCKS_EXCLUDED(mu_);
  void OnTimer() ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the request in the instance (once) and starts the cancel grace.
  void CancelRequest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // (Re)schedules the timer for the next deadline on the injected clock, converted into
  // the real time left (and checked again when it fires).
  void Arm() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const GenerateStreamDeps deps_;
  grpc::CallbackServerContext* const context_;  // gRPC's, valid until OnDone
  const RequestId id_;
  const std::shared_ptr<ResponseQueue> queue_;
  std::shared_ptr<GenerateStream> self_;  // gRPC's reference, dropped in OnDone
  std::atomic<bool> wake_queued_{false};   // a Pump is queued on the wake pool

  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;    // a StartWrite awaits OnWriteDone
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called (or is about to be)
  bool done_ ABSL_GUARDED_BY(mu_) = false;       // OnDone ran
  bool cancel_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool client_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_);
  absl::Time cancel_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  DeadlineTimers::Id timer_ ABSL_GUARDED_BY(mu_) = 0;
  // The status to finish with once the write in flight completes.
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
  v1::GenerateResponse out_;  // owned by the write in flight (writing_ or finishing_)
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_GENERATE_STREAM_H_

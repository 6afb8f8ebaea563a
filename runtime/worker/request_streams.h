// RequestStreams: the leader's hand-off between the executor thread, which produces
// responses (ResponseSink), and the Generate streams that send them to clients.
//
// Each Generate call opens a stream for its request id and sets a listener on its
// queue; a push wakes the listener, which takes what is queued (TryPop) without any
// thread waiting in between. The executor thread only appends to streams and never
// blocks; a stream that nobody reads any more (the client left) just drops what it gets.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_WORKER_REQUEST_STREAMS_H_
#define LOCKSTEP_RUNTIME_WORKER_REQUEST_STREAMS_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "runtime/executor/response.h"

namespace lockstep::worker {

class ResponseQueue {
 public:
  // Appends, then calls the listener (if any) on the pushing thread, outside any lock.
  void Push(exec::Response response) ABSL_LOCKS_EXCLUDED(mu_);
  // The next response, or nullopt if none arrived within `timeout` of real time (a
  // network read: not the injected Clock, whose time may be anywhere).
  std::optional<exec::Response> Next(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // The next response if one is queued; never waits.
  std::optional<exec::Response> TryPop() ABSL_LOCKS_EXCLUDED(mu_);
  // Called after every Push (and once now if something is already queued, so nothing
  // pushed before the listener was set is missed); nullptr removes it. The listener must
  // not block: it runs on the executor thread. A listener call that began before its
  // removal may still be running when SetListener returns.
  void SetListener(std::function<void()> listener) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::deque<exec::Response> queue_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::function<void()>> listener_ ABSL_GUARDED_BY(mu_);
};

class RequestStreams : public exec::ResponseSink {
 public:
  // AlreadyExists if `id` has an open stream.
  absl::StatusOr<std::shared_ptr<ResponseQueue>> Open(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  void Close(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);

  // Executor thread: routes each response to its stream; a final response closes it.
  void OnResponses(std::vector<exec::Response> responses) override ABSL_LOCKS_EXCLUDED(mu_);

  // Ends every open stream with `status` (the instance can no longer serve).
  void FailAll(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t open_streams() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RequestId, std::shared_ptr<ResponseQueue>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_REQUEST_STREAMS_H_

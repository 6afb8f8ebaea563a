// The threads that run the router's HTTP requests off the server's I/O threads
// (docs/threading.md §3): a generation request, or a /tokenize of a large body, runs
// on a thread of its own, started when the request arrives and ended when its
// response is complete; an I/O thread never waits for a worker or a model's text.
// Admission bounds how many generation requests run at once (routing/admission.h).
//
//   RequestThreads threads;
//   RETURN_IF_ERROR(threads.Run([exchange] { ... exchange->Respond(...); }));
//   threads.JoinAll();  // at shutdown, once the requests were told to end
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_REQUEST_THREADS_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_REQUEST_THREADS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep::router {

class RequestThreads {
 public:
  RequestThreads() = default;
  ~RequestThreads() { JoinAll(); }
  RequestThreads(const RequestThreads&) = delete;
  RequestThreads& operator=(const RequestThreads&) = delete;

  // Runs `body` on a new thread. UNAVAILABLE when the system refuses a thread, or
  // after JoinAll began.
  absl::Status Run(std::function<void()> body) ABSL_LOCKS_EXCLUDED(mu_);

  // Counts a request that runs without a thread of its own (RequestRunner::Start) as
  // running until the returned token (its last copy) is destroyed. Null after JoinAll
  // began.
  std::shared_ptr<void> Track() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until no body (or tracked request) runs, or `timeout` passes; true when none
  // runs.
  bool AwaitIdle(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for every body to return (and every tracked request to end) and joins its
  // thread; later Runs are refused.
  void JoinAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Bodies and tracked requests running now.
  int64_t running() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The end of body `id`'s thread: hands its std::thread over to be joined.
  void Finished(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the threads whose bodies returned.
  void JoinFinished() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::thread> running_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> finished_ ABSL_GUARDED_BY(mu_);
  int64_t tracked_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_REQUEST_THREADS_H_

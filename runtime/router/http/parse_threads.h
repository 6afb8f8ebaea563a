// A fixed number of threads that run the router's short CPU work off the I/O threads
// (parsing and tokenizing a generation request before it starts): whatever the requests
// in flight, these are all the threads it takes. Work runs in the order posted.
//
//   ParseThreads threads(2);
//   threads.Post([exchange] { ... });
//   threads.Stop();  // runs what was posted, then joins
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_PARSE_THREADS_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_PARSE_THREADS_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::router {

class ParseThreads {
 public:
  // Starts `n` (at least 1) threads.
  explicit ParseThreads(int n);
  ~ParseThreads() { Stop(); }
  ParseThreads(const ParseThreads&) = delete;
  ParseThreads& operator=(const ParseThreads&) = delete;

  // Queues `work`; false (dropping it) after Stop began.
  bool Post(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the work queued so far, then joins the threads; later Posts are refused.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_PARSE_THREADS_H_

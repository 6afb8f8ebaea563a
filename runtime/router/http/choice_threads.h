// The threads that run the `n` choices of one HTTP request at once (docs/threading.md
// §3): choice 0 on the calling thread (the handler's pool thread, or a stream's content
// provider), every other choice on a thread of its own. Those threads are all started,
// parked, before any choice runs, so a thread the system refuses fails the whole request
// with UNAVAILABLE (HTTP 503) before anything ran; it never terminates the process.
// They are bounded by admission: each choice holds a place (routing/admission.h).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ChoiceThreads> threads,
//                    ChoiceThreads::Start(n, StartThread));
//   threads->Run([&](int32_t i) { ... });  // returns when every choice has returned
//
// Thread safety: Start, Run and the destructor are called on one thread at a time.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_CHOICE_THREADS_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_CHOICE_THREADS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::router {

// Starts a thread that runs `body`, or says why it could not (a test injects failures).
using ThreadStarter = std::function<absl::StatusOr<std::thread>(std::function<void()> body)>;

// std::thread; UNAVAILABLE, with the system's reason, when it cannot start one.
absl::StatusOr<std::thread> StartThread(std::function<void()> body);

class ChoiceThreads {
 public:
  // Starts n - 1 parked threads with `start`. UNAVAILABLE naming the choice when one
  // cannot be started (the ones started end at once, without running anything).
  static absl::StatusOr<std::unique_ptr<ChoiceThreads>> Start(int32_t n,
                                                               const ThreadStarter& start);
  // Without Run, the parked threads end without running a choice; joins them.
  ~ChoiceThreads();

  ChoiceThreads(const ChoiceThreads&) = delete;
  ChoiceThreads& operator=(const ChoiceThreads&) = delete;

  // Runs run(i) for every choice i: 0 here, the others on their threads; returns when
  // all have returned. At most once.
  void Run(const std::function<void(int32_t)>& run) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ChoiceThreads() = default;
  // The body of choice `i`'s thread: waits for Run (or the end), then runs the choice.
  void Park(int32_t i) ABSL_LOCKS_EXCLUDED(mu_);
  // Lets the parked threads go, with `run` (null: they end) and joins them.
  void ReleaseAndJoin(const std::function<void(int32_t)>* run) ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  const std::function<void(int32_t)>* run_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<std::thread> threads_;  // choices 1.. (owned by the calling thread)
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_CHOICE_THREADS_H_

// Checks that a thread-compatible object is used only from its owner thread (the
// executor thread owns all scheduler, KV and spec-decode state).
//
//   class Executor {
//     void Step() { LOCKSTEP_DCHECK(thread_checker_.IsOnOwnerThread()); ... }
//     ThreadChecker thread_checker_;
//   };
//
// The owner is the first thread that asks (again after `Detach`), so an object
// may be built on one thread and handed to another before first use.
#ifndef LOCKSTEP_COMMON_THREAD_CHECKER_H_
#define LOCKSTEP_COMMON_THREAD_CHECKER_H_

#include <atomic>
#include <thread>

namespace lockstep {

class ThreadChecker {
 public:
  ThreadChecker() = default;

  // True when called on the owner thread; the first call binds the owner.
  bool IsOnOwnerThread() const {
    const std::thread::id self = std::this_thread::get_id();
    std::thread::id expected{};
    if (owner_.compare_exchange_strong(expected, self)) return true;
    return expected == self;
  }

  // Forgets the owner; the next caller of IsOnOwnerThread becomes the owner.
  void Detach() { owner_.store(std::thread::id{}); }

 private:
  mutable std::atomic<std::thread::id> owner_{};
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_THREAD_CHECKER_H_

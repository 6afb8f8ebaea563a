// Fatal invariant checks. A failed check logs the condition, the location and the
// streamed message through the "check" logger, flushes every logger and aborts.
//
//   LOCKSTEP_CHECK(history <= capacity) << "cache " << id;
//   LOCKSTEP_DCHECK(thread_checker_.IsOnOwnerThread());
//   LOCKSTEP_CHECK_OK(status);
//
// Use a CHECK only for what cannot happen (refcount underflow, an illegal state
// transition). What the environment can cause (bad config, a dead peer, bad input) is
// an absl::Status, never a CHECK. LOCKSTEP_DCHECK is compiled out under NDEBUG (-c opt)
// but its condition is still type-checked.
#ifndef LOCKSTEP_COMMON_CHECK_H_
#define LOCKSTEP_COMMON_CHECK_H_

#include <sstream>

#include "absl/status/status.h"

namespace lockstep::internal {

// Collects the streamed message; its destructor reports and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure();

  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  const char* condition_;
  std::ostringstream stream_;
};

// Makes `cond ? (void)0 : Voidify() & stream` well-formed.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace lockstep::internal

#define LOCKSTEP_CHECK(cond)                 \
  (cond) ? (void)0                           \
         : ::lockstep::internal::Voidify() & \
               ::lockstep::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define LOCKSTEP_CHECK_OK(expr)                                                      \
  for (::absl::Status lockstep_check_status_ = (expr); !lockstep_check_status_.ok(); \
       lockstep_check_status_ = ::absl::OkStatus())                                  \
  ::lockstep::internal::CheckFailure(__FILE__, __LINE__, #expr ".ok()").stream()     \
      << lockstep_check_status_ << " "

#ifdef NDEBUG
#define LOCKSTEP_DCHECK(cond) \
  while (false) LOCKSTEP_CHECK(cond)
#else
#define LOCKSTEP_DCHECK(cond) LOCKSTEP_CHECK(cond)
#endif

#endif  // LOCKSTEP_COMMON_CHECK_H_

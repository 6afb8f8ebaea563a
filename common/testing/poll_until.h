// PollUntil: re-evaluates a condition until it holds or a timeout passes, for tests
// that wait on another thread or process (a server's state, a child's exit).
#ifndef LOCKSTEP_COMMON_TESTING_POLL_UNTIL_H_
#define LOCKSTEP_COMMON_TESTING_POLL_UNTIL_H_

#include <functional>

#include "absl/time/time.h"

namespace lockstep::testing {

// True as soon as `condition()` is; false once `timeout` has passed without it. The
// condition is checked first, then every `interval`.
bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(10),
               absl::Duration interval = absl::Milliseconds(5));

}  // namespace lockstep::testing

#endif  // LOCKSTEP_COMMON_TESTING_POLL_UNTIL_H_

#include "common/stop_signal.h"

#include <poll.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Each case runs in a fresh process (the handlers and the flag are process-wide); a
// failed check prints what failed and exits 1.
#define CHECK_OR_EXIT(cond)                      \
  if (!(cond)) {                                 \
    std::fprintf(stderr, "failed: %s\n", #cond); \
    std::exit(1);                                \
  }

bool Readable(int fd) {
  pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

void SignalsWakeWaiters() {
  StopSignal& stop = StopSignal::Install();
  CHECK_OR_EXIT(&StopSignal::Install() == &stop);
  CHECK_OR_EXIT(!stop.requested() && stop.signal_number() == 0 && !Readable(stop.fd()));
  const absl::Time start = absl::Now();
  CHECK_OR_EXIT(!stop.WaitUntil(start + absl::Milliseconds(20)));
  CHECK_OR_EXIT(absl::Now() - start >= absl::Milliseconds(20));
  raise(SIGPIPE);  // ignored

  std::atomic<bool> woke{false};
  std::thread waiter([&] { woke = stop.WaitUntil(absl::InfiniteFuture()); });
  raise(SIGTERM);
  waiter.join();
  CHECK_OR_EXIT(woke.load() && stop.requested() && stop.signal_number() == SIGTERM);
  raise(SIGINT);  // a second signal changes nothing
  CHECK_OR_EXIT(stop.signal_number() == SIGTERM && Readable(stop.fd()));
  CHECK_OR_EXIT(stop.WaitUntil(absl::InfinitePast()));
  std::exit(0);
}

void RequestActsLikeASignal() {
  StopSignal& stop = StopSignal::Install();
  stop.Request();
  CHECK_OR_EXIT(stop.requested() && stop.signal_number() == 0 && Readable(stop.fd()));
  CHECK_OR_EXIT(stop.WaitUntil(absl::InfiniteFuture()));
  std::exit(0);
}

class StopSignalTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(StopSignalTest, SignalsWakeWaitersAndTheFirstOneIsKept) {
  EXPECT_EXIT(SignalsWakeWaiters(), ::testing::ExitedWithCode(0), "");
}

TEST_F(StopSignalTest, RequestActsLikeASignal) {
  EXPECT_EXIT(RequestActsLikeASignal(), ::testing::ExitedWithCode(0), "");
}

TEST_F(StopSignalTest, WithoutASignalTheWaitEndsAtTheDeadline) {
  StopSignal& stop = StopSignal::Install();
  const absl::Time deadline = absl::Now() + absl::Milliseconds(30);
  EXPECT_FALSE(stop.WaitUntil(deadline));
  EXPECT_GE(absl::Now(), deadline);
  EXPECT_FALSE(stop.requested());
}

}  // namespace
}  // namespace lockstep

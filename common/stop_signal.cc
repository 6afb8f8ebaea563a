#include "common/stop_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

#include "absl/time/clock.h"
#include "common/check.h"

namespace lockstep {
namespace {

// Written by the handler: only lock-free atomics and write(2).
std::atomic<bool> g_requested{false};
std::atomic<int> g_signal{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
int g_pipe[2] = {-1, -1};  // set once, before the handlers are installed

void Notify() {
  g_requested.store(true);
  const int saved_errno = errno;
  const char byte = 's';
  ssize_t ignored = write(g_pipe[1], &byte, 1);  // non-blocking; one byte is enough
  (void)ignored;
  errno = saved_errno;
}

void OnStopSignal(int signal_number) {
  int none = 0;
  g_signal.compare_exchange_strong(none, signal_number);
  Notify();
}

}  // namespace

StopSignal& StopSignal::Install() {
  static StopSignal* const instance = [] {
    LOCKSTEP_CHECK(pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) == 0) << "pipe2 failed: " << errno;
    struct sigaction action = {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int signal_number : {SIGINT, SIGTERM}) sigaction(signal_number, &action, nullptr);
    signal(SIGPIPE, SIG_IGN);
    return new StopSignal();
  }();
  return *instance;
}

bool StopSignal::requested() const { return g_requested.load(); }

int StopSignal::signal_number() const { return g_signal.load(); }

int StopSignal::fd() const { return g_pipe[0]; }

void StopSignal::Request() { Notify(); }

bool StopSignal::WaitUntil(absl::Time deadline) const {
  while (!requested()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    // Rounded up, so the wait never ends before the deadline; -1: no deadline.
    const int timeout_ms =
        left == absl::InfiniteDuration()
            ? -1
            : static_cast<int>(std::min<int64_t>(
                  absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
    pollfd readable = {fd(), POLLIN, 0};
    poll(&readable, 1, timeout_ms);  // EINTR: loop and look again
  }
  return requested();
}

}  // namespace lockstep

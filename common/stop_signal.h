// The daemons' stop signals (worker, router, launcher): SIGINT and SIGTERM ask the
// process to stop; SIGPIPE is ignored, so a peer that disconnects never kills it.
//
//   StopSignal& stop = StopSignal::Install();  // before starting threads
//   ... serve ...
//   stop.WaitUntil(absl::InfiniteFuture());
//   LOCKSTEP_LOG_INFO("router", "signal {}: shutting down", stop.signal_number());
//
// The handler only stores the signal number in a lock-free atomic and writes a byte
// to a pipe (both async-signal-safe). The pipe stays readable once a stop has been
// requested, so `fd()` can join a poll() loop next to other descriptors.
//
// Thread safety: every method may be called from any thread.
#ifndef LOCKSTEP_COMMON_STOP_SIGNAL_H_
#define LOCKSTEP_COMMON_STOP_SIGNAL_H_

#include "absl/time/time.h"

namespace lockstep {

class StopSignal {
 public:
  // Installs the handlers on the first call; every call returns the one instance.
  static StopSignal& Install();

  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  // Whether a stop signal (or Request) has arrived.
  bool requested() const;
  // The first stop signal that arrived (SIGINT or SIGTERM); 0 before one, or when the
  // stop came from Request.
  int signal_number() const;

  // Blocks until a stop is requested or `deadline` passes; returns requested().
  bool WaitUntil(absl::Time deadline) const;

  // Readable from the moment a stop is requested, for poll().
  int fd() const;

  // Requests a stop as a signal would (a daemon stopping itself; tests).
  void Request();

 private:
  StopSignal() = default;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_STOP_SIGNAL_H_

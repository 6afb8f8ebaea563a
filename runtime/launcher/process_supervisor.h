// A supervisor of child processes for the launcher: starts each child with its output
// in a log file, notices at once when one exits (pidfds and poll, no sleeping), waits
// for readiness with a deadline, and stops them all: SIGTERM, then SIGKILL after a
// grace period.
//
// No orphans. Each child runs in a process group of its own (signals go to the whole
// group, grandchildren included) and asks the kernel for SIGKILL when the supervising
// thread dies (PR_SET_PDEATHSIG), so even a SIGKILLed launcher leaves nothing behind.
// The supervisor must therefore be used from one long-lived thread (main).
//
//   ProcessSupervisor supervisor;
//   RETURN_IF_ERROR(supervisor.Start({"router", {"/bin/lockstep", "router", ...},
//   "run/router.log"})); RETURN_IF_ERROR(supervisor.WaitReady(probe, absl::Seconds(60))); for
//   (ChildExit& exit : supervisor.Wait(absl::Seconds(1)).exited) report(exit.Describe());
//   supervisor.StopAll(absl::Seconds(10));
//
// Thread safety: thread-compatible; owned by the thread that starts the children.
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_PROCESS_SUPERVISOR_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_PROCESS_SUPERVISOR_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockstep::launcher {

struct ProcessSpec {
  std::string name;               // how reports name it, e.g. "gen0/rank2"
  std::vector<std::string> argv;  // argv[0] is the executable's path
  // stdout and stderr are appended here; empty: the child writes to this process's own
  // (inherited, not reopened: reopening /dev/stderr fails for another user's pipe).
  std::string log_path;
};

// How a child ended.
struct ChildExit {
  std::string name;
  pid_t pid = 0;
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  std::string log_path;
  // When it did not end cleanly: the last error it logged (LastLoggedError), "" if none.
  std::string last_error;

  bool clean() const { return signal == 0 && exit_code == 0; }
  // "gen0/rank2 (pid 1234) exited with status 3; last error: engine cuda: ...; log:
  // run/gen0.rank2.log" ("; last error: ..." only when there is one, "; log: ..." only
  // with a log file).
  std::string Describe() const;
};

// A pidfd for `pid` (readable once it exits), or -1 with errno set.
int OpenPidfd(pid_t pid);

// The message of the last error or critical line (the `[E]` / `[C]` lines of
// common/log.h) in the log file at `path` from byte `from` on (at most its last 64 KiB
// are read), without the line's prefix, cut to 400 bytes; "" when there is none.
std::string LastLoggedError(const std::string& path, int64_t from = 0);

class ProcessSupervisor {
 public:
  ProcessSupervisor() = default;
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;
  // Stops every child still running (grace: 5 s).
  ~ProcessSupervisor();

  // Starts a child. Errors: the log file cannot be opened, fork fails, or the
  // executable cannot be run (reported by the child through a pipe, with errno).
  absl::Status Start(const ProcessSpec& spec);

  struct WaitResult {
    std::vector<ChildExit> exited;  // reaped, possibly none
    bool woke = false;              // `wake_fd` is readable
  };
  // Waits up to `timeout` for a child to exit or for `wake_fd` (when >= 0) to become
  // readable.
  WaitResult Wait(absl::Duration timeout, int wake_fd = -1);

  // Calls `ready()` every `interval` until it returns true (OK), a child exits
  // (FAILED_PRECONDITION naming it, its status and its log), `wake_fd` becomes
  // readable (CANCELLED), or `timeout` passes (DEADLINE_EXCEEDED).
  absl::Status WaitReady(const std::function<bool()>& ready, absl::Duration timeout,
                         absl::Duration interval = absl::Milliseconds(200), int wake_fd = -1);

  // SIGTERM to the running children named in `names`, SIGKILL to those still running
  // after `grace`. Returns every child reaped meanwhile: those, and any other that
  // happened to exit. Afterwards none of `names` is left.
  std::vector<ChildExit> Stop(const std::vector<std::string>& names, absl::Duration grace);
  // Stop(Running(), grace): afterwards no child is left.
  std::vector<ChildExit> StopAll(absl::Duration grace) { return Stop(Running(), grace); }

  // Names of the children still running, in start order.
  std::vector<std::string> Running() const;
  // The pid of a running child, or -1.
  pid_t PidOf(const std::string& name) const;

 private:
  struct Child {
    ProcessSpec spec;
    pid_t pid = -1;
    int pidfd = -1;
    int64_t log_start = 0;  // the log's size when it started: what it wrote comes after
  };

  // Reaps the child at `index` if it exited; removes it and returns true.
  bool Reap(size_t index, bool block, ChildExit* exit);

  std::vector<Child> children_;
};

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_PROCESS_SUPERVISOR_H_

// SelfProcess: this test binary started again as a child process, for multi-process
// tests (a rank in a process of its own, killed or stopped by the test). The child sees
// one extra environment variable (the test's main() checks it and runs the child's part
// instead of the tests), reads its stdin from the parent and writes lines to it on its
// stdout.
//
//   SelfProcess child("LOCKSTEP_MY_CHILD", absl::StrCat(seed, ",", mode));
//   const std::string address = child.ReadLine(absl::Seconds(30));  // "" on timeout
//   child.Signal(SIGKILL);
//   child.Reap();
//
// Thread safety: one thread uses an instance. The destructor SIGKILLs and reaps a child
// still running, so none outlives its test.
#ifndef LOCKSTEP_COMMON_TESTING_SELF_PROCESS_H_
#define LOCKSTEP_COMMON_TESTING_SELF_PROCESS_H_

#include <sys/types.h>

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::testing {

class SelfProcess {
 public:
  // Starts /proc/self/exe with `env_name`=`env_value` added to this environment. A
  // failed start is a test failure (gtest's EXPECT) and leaves no child.
  SelfProcess(absl::string_view env_name, absl::string_view env_value);
  ~SelfProcess();
  SelfProcess(const SelfProcess&) = delete;
  SelfProcess& operator=(const SelfProcess&) = delete;

  // The next line the child prints (without its newline), or "" when none came within
  // `timeout` or the child closed its stdout.
  std::string ReadLine(absl::Duration timeout);

  // Sends `signal` to the child (nothing once it was reaped).
  void Signal(int signal);
  // Waits for the child to exit (after a fatal signal: at once).
  void Reap();

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;   // the child's stdin, written here
  int stdout_ = -1;  // the child's stdout, read here
};

}  // namespace lockstep::testing

#endif  // LOCKSTEP_COMMON_TESTING_SELF_PROCESS_H_

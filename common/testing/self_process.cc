#include "common/testing/self_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace lockstep::testing {

SelfProcess::SelfProcess(absl::string_view env_name, absl::string_view env_value) {
  int to_child[2];
  int from_child[2];
  EXPECT_EQ(pipe(to_child), 0);
  EXPECT_EQ(pipe(from_child), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  posix_spawn_file_actions_addclose(&actions, to_child[1]);
  posix_spawn_file_actions_addclose(&actions, from_child[0]);
  std::vector<std::string> env_strings = {absl::StrCat(env_name, "=", env_value)};
  for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
  std::vector<char*> env;
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};
  if (posix_spawn(&pid_, self, &actions, nullptr, argv, env.data()) != 0) {
    ADD_FAILURE() << "could not start " << self << " as a child process";
    pid_ = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  stdin_ = to_child[1];
  stdout_ = from_child[0];
}

SelfProcess::~SelfProcess() {
  close(stdin_);
  close(stdout_);
  if (pid_ > 0) {
    Signal(SIGKILL);
    Reap();
  }
}

std::string SelfProcess::ReadLine(absl::Duration timeout) {
  std::string line;
  const absl::Time deadline = absl::Now() + timeout;
  while (line.empty() || line.back() != '\n') {
    pollfd out{.fd = stdout_, .events = POLLIN, .revents = 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    char c;
    if (ms <= 0 || poll(&out, 1, ms) != 1 || read(stdout_, &c, 1) != 1) return "";
    line.push_back(c);
  }
  line.pop_back();
  return line;
}

void SelfProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

void SelfProcess::Reap() {
  if (pid_ <= 0) return;
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace lockstep::testing

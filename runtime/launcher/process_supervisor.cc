#include "runtime/launcher/process_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/strings/str_join.h"
#include "fmt/format.h"

namespace lockstep::launcher {
namespace {

std::string ErrnoText(int error) { return strerror(error); }

// Signals the child's process group, or the child alone if it has no group yet.
void SignalChild(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

// Runs in the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(char* const* argv, int log_fd, int error_fd, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(126);  // the parent died before prctl
  // The launcher handles and ignores signals for itself; the child starts clean
  // (handlers first, so no stop signal reaches the launcher's handler here).
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  if (log_fd >= 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
  }
  execv(argv[0], argv);
  const int error = errno;
  ssize_t ignored = write(error_fd, &error, sizeof(error));
  (void)ignored;
  _exit(127);
}

}  // namespace

int OpenPidfd(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::string ChildExit::Describe() const {
  const std::string how =
      signal != 0 ? fmt::format("was killed by signal {} ({})", signal, strsignal(signal))
                  : fmt::format("exited with status {}", exit_code);
  const std::string error = last_error.empty() ? "" : fmt::format("; last error: {}", last_error);
  const std::string log = log_path.empty() ? "" : fmt::format("; log: {}", log_path);
  return fmt::format("{} (pid {}) {}{}{}", name, pid, how, error, log);
}

namespace {

// The message of a common/log.h line of level error or critical:
// "[2026-01-02 03:04:05.678] [E] [role/instance/rank] [module] message".
std::optional<std::string_view> ErrorMessageOf(std::string_view line) {
  if (line.empty() || line[0] != '[') return std::nullopt;
  const size_t time_end = line.find("] [");
  if (time_end == std::string_view::npos || line.size() < time_end + 6) return std::nullopt;
  const char level = line[time_end + 3];
  if (line.substr(time_end + 4, 3) != "] [" || (level != 'E' && level != 'C')) {
    return std::nullopt;
  }
  const size_t tag_end = line.find("] [", time_end + 7);
  if (tag_end == std::string_view::npos) return std::nullopt;
  const size_t module_end = line.find("] ", tag_end + 3);
  if (module_end == std::string_view::npos) return std::nullopt;
  return line.substr(module_end + 2);
}

}  // namespace

std::string LastLoggedError(const std::string& path, int64_t from) {
  constexpr int64_t kTail = 64 << 10;
  constexpr size_t kMaxMessage = 400;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string text;
  if (fstat(fd, &st) == 0 && st.st_size > from) {
    const int64_t start = std::max<int64_t>(from, st.st_size - kTail);
    text.resize(static_cast<size_t>(st.st_size - start));
    const ssize_t n = pread(fd, text.data(), text.size(), start);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t newline = rest.rfind('\n', rest.size() - 1);
    std::string_view line = newline == std::string_view::npos ? rest : rest.substr(newline + 1);
    rest = newline == std::string_view::npos ? std::string_view() : rest.substr(0, newline);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (std::optional<std::string_view> message = ErrorMessageOf(line)) {
      std::string out(message->substr(0, kMaxMessage));
      if (message->size() > kMaxMessage) out += "...";
      return out;
    }
  }
  return "";
}

ProcessSupervisor::~ProcessSupervisor() { StopAll(absl::Seconds(5)); }

absl::Status ProcessSupervisor::Start(const ProcessSpec& spec) {
  if (spec.argv.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: empty command line", spec.name));
  }
  const int log_fd = spec.log_path.empty() ? -1
                                           : open(spec.log_path.c_str(),
                                                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0 && !spec.log_path.empty()) {
    return absl::UnavailableError(
        fmt::format("{}: cannot open log file {}: {}", spec.name, spec.log_path, ErrnoText(errno)));
  }
  struct stat log_stat;
  const int64_t log_start = log_fd >= 0 && fstat(log_fd, &log_stat) == 0 ? log_stat.st_size : 0;
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    if (log_fd >= 0) close(log_fd);
    return absl::InternalError(fmt::format("{}: pipe: {}", spec.name, ErrnoText(errno)));
  }
  std::vector<char*> argv;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(argv.data(), log_fd, error_pipe[1], parent);
  const int fork_errno = errno;
  if (log_fd >= 0) close(log_fd);
  close(error_pipe[1]);
  if (pid < 0) {
    close(error_pipe[0]);
    return absl::UnavailableError(fmt::format("{}: fork: {}", spec.name, ErrnoText(fork_errno)));
  }
  setpgid(pid, pid);  // also here, so that a signal sent right away reaches the group
  // exec closes the pipe (O_CLOEXEC): 0 bytes means the program started.
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(error_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n > 0) {
    waitpid(pid, nullptr, 0);
    return absl::FailedPreconditionError(
        fmt::format("{}: cannot run {}: {}", spec.name, spec.argv[0], ErrnoText(exec_errno)));
  }
  const int pidfd = OpenPidfd(pid);
  if (pidfd < 0) {
    const int error = errno;
    SignalChild(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return absl::InternalError(fmt::format("{}: pidfd_open: {}", spec.name, ErrnoText(error)));
  }
  children_.push_back({spec, pid, pidfd, log_start});
  return absl::OkStatus();
}

bool ProcessSupervisor::Reap(size_t index, bool block, ChildExit* exit) {
  Child& child = children_[index];
  int status = 0;
  pid_t done;
  do {
    done = waitpid(child.pid, &status, block ? 0 : WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done == 0 || (done < 0 && errno != ECHILD)) return false;
  // ECHILD: reaped elsewhere; the status is unknown (exit_code stays -1).
  exit->name = child.spec.name;
  exit->pid = child.pid;
  exit->log_path = child.spec.log_path;
  if (done == child.pid && WIFSIGNALED(status)) {
    exit->signal = WTERMSIG(status);
  } else if (done == child.pid) {
    exit->exit_code = WEXITSTATUS(status);
  }
  if (!exit->clean() && !child.spec.log_path.empty()) {
    exit->last_error = LastLoggedError(child.spec.log_path, child.log_start);
  }
  close(child.pidfd);
  kill(-child.pid, SIGKILL);  // whatever it left in its group
  children_.erase(children_.begin() + static_cast<ptrdiff_t>(index));
  return true;
}

ProcessSupervisor::WaitResult ProcessSupervisor::Wait(absl::Duration timeout, int wake_fd) {
  WaitResult result;
  std::vector<pollfd> fds;
  for (const Child& child : children_) fds.push_back({child.pidfd, POLLIN, 0});
  if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
  const int timeout_ms =
      static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 0, 1 << 30));
  const int ready = poll(fds.data(), fds.size(), timeout_ms);
  if (ready <= 0) return result;  // timeout or EINTR
  if (wake_fd >= 0 && (fds.back().revents & POLLIN)) result.woke = true;
  for (size_t i = children_.size(); i-- > 0;) {
    if (fds[i].revents == 0) continue;
    ChildExit exit;
    if (Reap(i, /*block=*/true, &exit)) result.exited.push_back(exit);
  }
  return result;
}

absl::Status ProcessSupervisor::WaitReady(const std::function<bool()>& ready,
                                          absl::Duration timeout, absl::Duration interval,
                                          int wake_fd) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(fmt::format("not ready after {} (running: {})",
                                                     absl::FormatDuration(timeout),
                                                     absl::StrJoin(Running(), ", ")));
    }
    WaitResult result = Wait(std::min(interval, deadline - now), wake_fd);
    if (!result.exited.empty()) {
      std::vector<std::string> lines;
      for (const ChildExit& exit : result.exited) lines.push_back(exit.Describe());
      return absl::FailedPreconditionError(fmt::format(
          "a process ended before the deployment was ready: {}", absl::StrJoin(lines, "; ")));
    }
    if (result.woke) return absl::CancelledError("interrupted while waiting for readiness");
  }
  return absl::OkStatus();
}

std::vector<ChildExit> ProcessSupervisor::Stop(const std::vector<std::string>& names,
                                               absl::Duration grace) {
  auto targeted = [&](const Child& child) {
    return std::find(names.begin(), names.end(), child.spec.name) != names.end();
  };
  auto any_left = [&] { return std::any_of(children_.begin(), children_.end(), targeted); };
  std::vector<ChildExit> exits;
  for (const Child& child : children_) {
    if (targeted(child)) SignalChild(child.pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  while (any_left() && absl::Now() < deadline) {
    for (ChildExit& exit : Wait(deadline - absl::Now()).exited) exits.push_back(exit);
  }
  for (size_t i = children_.size(); i-- > 0;) {
    if (!targeted(children_[i])) continue;
    SignalChild(children_[i].pid, SIGKILL);
    ChildExit exit;
    Reap(i, /*block=*/true, &exit);  // a blocking reap always ends it
    exits.push_back(exit);
  }
  return exits;
}

std::vector<std::string> ProcessSupervisor::Running() const {
  std::vector<std::string> names;
  for (const Child& child : children_) names.push_back(child.spec.name);
  return names;
}

pid_t ProcessSupervisor::PidOf(const std::string& name) const {
  for (const Child& child : children_) {
    if (child.spec.name == name) return child.pid;
  }
  return -1;
}

}  // namespace lockstep::launcher

#include "runtime/comm/testing/rank_processes.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace lockstep::comm::testing {
namespace {

constexpr char kScenarioEnv[] = "LOCKSTEP_RANK_SCENARIO";
constexpr char kRankEnv[] = "LOCKSTEP_RANK";
constexpr char kWorldEnv[] = "LOCKSTEP_WORLD_SIZE";
// Arguments joined with a separator that paths and numbers do not contain.
constexpr char kArgsEnv[] = "LOCKSTEP_RANK_ARGS";
constexpr char kArgSeparator = '\x1f';

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

std::optional<RankProcessRole> GetRankProcessRole() {
  const char* scenario = std::getenv(kScenarioEnv);
  const char* rank = std::getenv(kRankEnv);
  const char* world = std::getenv(kWorldEnv);
  const char* args = std::getenv(kArgsEnv);
  if (scenario == nullptr || rank == nullptr || world == nullptr) return std::nullopt;
  RankProcessRole role;
  role.scenario = scenario;
  if (!absl::SimpleAtoi(rank, &role.rank) || !absl::SimpleAtoi(world, &role.world_size)) {
    return std::nullopt;
  }
  if (args != nullptr && args[0] != '\0') {
    role.args = absl::StrSplit(args, kArgSeparator);
  }
  return role;
}

std::string DescribeExit(const RankExit& exit) {
  return exit.exited ? absl::StrCat("exit code ", exit.exit_code)
                     : absl::StrCat("killed by signal ", exit.signal);
}

absl::StatusOr<std::vector<RankExit>> RunRankProcesses(absl::string_view scenario, int world_size,
                                                       const std::vector<std::string>& args,
                                                       absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<pid_t> pids(world_size, -1);
  std::vector<int> pidfds(world_size, -1);
  std::vector<RankExit> exits(world_size);
  absl::Status status;
  for (int r = 0; r < world_size && status.ok(); ++r) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
    env_strings.push_back(absl::StrCat(kScenarioEnv, "=", scenario));
    env_strings.push_back(absl::StrCat(kRankEnv, "=", r));
    env_strings.push_back(absl::StrCat(kWorldEnv, "=", world_size));
    env_strings.push_back(
        absl::StrCat(kArgsEnv, "=", absl::StrJoin(args, std::string(1, kArgSeparator))));
    std::vector<char*> env;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, nullptr};
    const int err = posix_spawn(&pids[r], exe, nullptr, nullptr, argv, env.data());
    if (err != 0) {
      errno = err;
      status = Errno(absl::StrCat("posix_spawn of rank ", r));
      break;
    }
    pidfds[r] = static_cast<int>(syscall(SYS_pidfd_open, pids[r], 0));
    if (pidfds[r] < 0) status = Errno("pidfd_open");
  }
  // Wait for every started rank, bounded by the deadline.
  std::vector<int> running;
  for (int r = 0; r < world_size; ++r) {
    if (pids[r] > 0) running.push_back(r);
  }
  while (!running.empty() && status.ok()) {
    std::vector<pollfd> fds;
    for (int r : running) fds.push_back({pidfds[r], POLLIN, 0});
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left_ms));
    if (ready < 0 && errno != EINTR) {
      status = Errno("poll");
      break;
    }
    std::vector<int> still_running;
    for (size_t i = 0; i < fds.size(); ++i) {
      const int r = running[i];
      if ((fds[i].revents & POLLIN) == 0) {
        still_running.push_back(r);
        continue;
      }
      int wstatus = 0;
      if (waitpid(pids[r], &wstatus, 0) == pids[r]) {
        exits[r].exited = WIFEXITED(wstatus);
        exits[r].exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
        exits[r].signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
      }
      close(pidfds[r]);
      pidfds[r] = -1;
    }
    running = std::move(still_running);
  }
  if (!running.empty()) {
    for (int r : running) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
      if (pidfds[r] >= 0) close(pidfds[r]);
    }
    if (status.ok()) {
      status = absl::DeadlineExceededError(absl::StrCat(
          "rank process(es) ", absl::StrJoin(running, ", "), " of scenario '", scenario,
          "' still running after ", absl::FormatDuration(timeout), "; killed"));
    }
  }
  if (!status.ok()) return status;
  return exits;
}

std::string MakeTempDir(absl::string_view name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(base != nullptr ? base : "/tmp", "/", name, ".XXXXXX");
  if (mkdtemp(path.data()) == nullptr) return "";
  return path;
}

}  // namespace lockstep::comm::testing

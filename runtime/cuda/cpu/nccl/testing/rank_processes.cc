#include "runtime/cuda/cpu/nccl/testing/rank_processes.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace lockstep::cuda_cpu::nccl::testing {
namespace {

constexpr char kScenarioEnv[] = "LOCKSTEP_NCCL_TEST_SCENARIO";
constexpr char kRankEnv[] = "LOCKSTEP_NCCL_TEST_RANK";
constexpr char kWorldEnv[] = "LOCKSTEP_NCCL_TEST_WORLD";
constexpr char kArgsEnv[] = "LOCKSTEP_NCCL_TEST_ARGS";
constexpr char kSeparator = '\x1f';

}  // namespace

std::optional<NcclRankRole> GetNcclRankRole() {
  const char* scenario = std::getenv(kScenarioEnv);
  const char* rank = std::getenv(kRankEnv);
  const char* world = std::getenv(kWorldEnv);
  const char* args = std::getenv(kArgsEnv);
  if (scenario == nullptr || rank == nullptr || world == nullptr) return std::nullopt;
  NcclRankRole role;
  role.scenario = scenario;
  if (!absl::SimpleAtoi(rank, &role.rank) || !absl::SimpleAtoi(world, &role.world)) {
    return std::nullopt;
  }
  if (args != nullptr && args[0] != '\0') role.args = absl::StrSplit(args, kSeparator);
  return role;
}

std::string Describe(const NcclRankExit& exit) {
  return exit.exited ? absl::StrCat("exit code ", exit.exit_code)
                     : absl::StrCat("killed by signal ", exit.signal);
}

absl::StatusOr<std::vector<NcclRankExit>> RunNcclRanks(absl::string_view scenario, int world,
                                                       const std::vector<std::string>& args,
                                                       const std::vector<std::string>& env,
                                                       absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<pid_t> pids;
  std::vector<int> pidfds;
  std::vector<NcclRankExit> exits(world);
  absl::Status status;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> strings;
    for (char** e = environ; *e != nullptr; ++e) strings.emplace_back(*e);
    strings.insert(strings.end(), env.begin(), env.end());
    strings.push_back(absl::StrCat(kScenarioEnv, "=", scenario));
    strings.push_back(absl::StrCat(kRankEnv, "=", r));
    strings.push_back(absl::StrCat(kWorldEnv, "=", world));
    strings.push_back(absl::StrCat(kArgsEnv, "=", absl::StrJoin(args, std::string(1, kSeparator))));
    std::vector<char*> envp;
    for (std::string& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, nullptr};
    pid_t pid = -1;
    if (int err = posix_spawn(&pid, exe, nullptr, nullptr, argv, envp.data()); err != 0) {
      status =
          absl::InternalError(absl::StrCat("posix_spawn of rank ", r, ": ", std::strerror(err)));
      break;
    }
    pids.push_back(pid);
    pidfds.push_back(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  }
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  std::vector<int> late;
  while (left > 0) {
    std::vector<struct pollfd> fds;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (!done[r]) fds.push_back({pidfds[r], POLLIN, 0});
    }
    const int64_t ms = std::max<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0);
    poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms, 1000)));
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int wstatus = 0;
      if (waitpid(pids[r], &wstatus, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --left;
      exits[r].exited = WIFEXITED(wstatus);
      exits[r].exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
      exits[r].signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
    }
    if (left > 0 && absl::Now() >= deadline) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (done[r]) continue;
        late.push_back(static_cast<int>(r));
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
      }
      break;
    }
  }
  for (int fd : pidfds) {
    if (fd >= 0) close(fd);
  }
  if (!status.ok()) return status;
  if (!late.empty()) {
    return absl::DeadlineExceededError(absl::StrCat("rank(s) ", absl::StrJoin(late, ", "),
                                                    " still running after ",
                                                    absl::FormatDuration(timeout)));
  }
  return exits;
}

}  // namespace lockstep::cuda_cpu::nccl::testing

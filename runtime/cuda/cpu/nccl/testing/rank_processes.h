// Multi-process tests of the NCCL layer: the test binary re-executes itself once per
// rank (a fresh process, as in production), telling each child its role through the
// environment. (runtime/comm/testing/rank_processes.h does the same for the
// communicators; that target is private to runtime/comm.)
//
//   int main(int argc, char** argv) {
//     if (auto role = GetNcclRankRole()) return RunRank(*role);  // a child
//     ...
//   }
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_TESTING_RANK_PROCESSES_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_TESTING_RANK_PROCESSES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::cuda_cpu::nccl::testing {

struct NcclRankRole {
  std::string scenario;
  int rank = 0;
  int world = 0;
  std::vector<std::string> args;
};

// This process's role if RunNcclRanks started it.
std::optional<NcclRankRole> GetNcclRankRole();

struct NcclRankExit {
  bool exited = false;  // with exit_code; else killed by signal
  int exit_code = -1;
  int signal = 0;
};
std::string Describe(const NcclRankExit& exit);

// Starts `world` copies of this binary (extra environment `env`, "NAME=value") and
// waits for them. At `timeout` the ones still running are killed and DeadlineExceeded
// names them.
absl::StatusOr<std::vector<NcclRankExit>> RunNcclRanks(absl::string_view scenario, int world,
                                                       const std::vector<std::string>& args,
                                                       const std::vector<std::string>& env,
                                                       absl::Duration timeout);

}  // namespace lockstep::cuda_cpu::nccl::testing

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_NCCL_TESTING_RANK_PROCESSES_H_

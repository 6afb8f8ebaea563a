// Multi-process tests: a test binary re-executes itself once per rank, so that every
// rank is a fresh process (no gRPC or gloo state inherited through fork()).
//
//   int main(int argc, char** argv) {
//     if (auto role = GetRankProcessRole()) return RunMyRank(*role);  // a child
//     ::testing::InitGoogleTest(&argc, argv);
//     return RUN_ALL_TESTS();
//   }
//
// and in a test: RunRankProcesses("conformance", 4, {dir, seed}, absl::Seconds(40)).
#ifndef LOCKSTEP_RUNTIME_COMM_TESTING_RANK_PROCESSES_H_
#define LOCKSTEP_RUNTIME_COMM_TESTING_RANK_PROCESSES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace lockstep::comm::testing {

// What a child was started to do.
struct RankProcessRole {
  std::string scenario;
  int rank = 0;
  int world_size = 0;
  std::vector<std::string> args;
};

// The role of this process if RunRankProcesses started it, else nullopt.
std::optional<RankProcessRole> GetRankProcessRole();

// How a rank process ended.
struct RankExit {
  bool exited = false;  // Exited normally with `exit_code`; else killed by `signal`.
  int exit_code = -1;
  int signal = 0;
};
std::string DescribeExit(const RankExit& exit);

// Starts `world_size` copies of this binary with the role (scenario, rank, world_size,
// args) and waits for all of them. At `timeout` the ones still running are killed and
// DeadlineExceeded names them.
absl::StatusOr<std::vector<RankExit>> RunRankProcesses(absl::string_view scenario, int world_size,
                                                       const std::vector<std::string>& args,
                                                       absl::Duration timeout);

// A fresh directory under $TEST_TMPDIR (or /tmp), e.g. for a gloo FileStore.
std::string MakeTempDir(absl::string_view name);

}  // namespace lockstep::comm::testing

#endif  // LOCKSTEP_RUNTIME_COMM_TESTING_RANK_PROCESSES_H_

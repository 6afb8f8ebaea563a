// `lockstep bench --workload multi-turn` (tools/bench/multi_turn.h): with --config, the
// deployment is started once per policy in --policies (default least_load,kv_aware),
// each run with the same workload and seed, and the last is compared with the first;
// with --http and --grpc, one run against a running deployment.
//
//   lockstep bench --workload multi-turn --config deploy/local/agg_dep2.yaml --users 16
//       --concurrency 8 [--json FILE]
#ifndef LOCKSTEP_TOOLS_BENCH_MULTI_TURN_COMMAND_H_
#define LOCKSTEP_TOOLS_BENCH_MULTI_TURN_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep::bench {

int RunMultiTurnBench(const std::vector<std::string>& args);

// The deployment file at `config_path` as YAML text with router.policy = `policy` and
// its model paths absolute (the text is started from another directory).
absl::StatusOr<std::string> ConfigWithPolicy(const std::string& config_path,
                                             const std::string& policy);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_MULTI_TURN_COMMAND_H_

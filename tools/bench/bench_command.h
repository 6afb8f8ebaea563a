// `lockstep bench`: a workload against a deployment, started from a config file or
// already running, with client-side latency figures and the instances' counters.
//
//   lockstep bench --config deploy/local/disagg_ctx_dep2_gen_dep4.yaml --requests 1600
//       --concurrency 32 [--json FILE]
//   lockstep bench --http HOST:PORT --grpc HOST:PORT --requests 100
//   lockstep bench --workload multi-turn --config deploy/local/agg_dep2.yaml
//       (tools/bench/multi_turn_command.h)
//   lockstep bench --config deploy/local/agg_two_dep2.yaml --requests 64 --concurrency 64
//       --kill agg0/rank1     # SIGKILL a rank mid-load: failure-to-next-token of the
//                             # migrated requests (failure_injection.h)
#ifndef LOCKSTEP_TOOLS_BENCH_BENCH_COMMAND_H_
#define LOCKSTEP_TOOLS_BENCH_BENCH_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::bench {

int RunBench(const std::vector<std::string>& args);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_BENCH_COMMAND_H_

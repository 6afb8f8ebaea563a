// Counters of every instance a router knows, read from each leader's
// WorkerService.Stats (addresses from RouterService.ListInstances).
#ifndef LOCKSTEP_TOOLS_BENCH_INSTANCE_STATS_H_
#define LOCKSTEP_TOOLS_BENCH_INSTANCE_STATS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/bench_report.h"

namespace lockstep::bench {

// Cumulative counters by instance name, of the instances whose leader answers.
absl::StatusOr<std::map<std::string, InstanceDelta>> ReadInstanceCounters(
    const std::string& router_grpc_address);

// after - before, per instance present in `after`.
std::vector<InstanceDelta> Subtract(const std::map<std::string, InstanceDelta>& after,
                                    const std::map<std::string, InstanceDelta>& before);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_INSTANCE_STATS_H_

// The figures `lockstep bench` reports, from the client's outcomes and the instances'
// counters, as text and as JSON.
#ifndef LOCKSTEP_TOOLS_BENCH_BENCH_REPORT_H_
#define LOCKSTEP_TOOLS_BENCH_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/bench/load_generator.h"

namespace lockstep::bench {

// Counter deltas of one instance over the run (WorkerService.Stats after minus before).
struct InstanceDelta {
  std::string name;
  std::string role;
  int64_t steps = 0;
  int64_t vetoed_steps = 0;
  int64_t padded_steps = 0;
  int64_t drafts_proposed = 0;
  int64_t drafts_accepted = 0;
  int64_t generated_tokens = 0;
  // How the instance speculates, from the deployment config when the bench started it
  // ("ngram K=4 dynamic"); empty when unknown.
  std::string speculative;
  int64_t kv_bytes_received = 0;
  double kv_receive_seconds = 0;
};

struct Percentiles {
  double p50 = 0;
  double p99 = 0;
};
Percentiles Compute(std::vector<double> values);

nlohmann::json MakeReport(const LoadOptions& options, const LoadResult& result,
                          const std::vector<InstanceDelta>& instances);
std::string FormatReport(const nlohmann::json& report);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_BENCH_REPORT_H_

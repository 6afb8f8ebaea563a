// The figures `lockstep bench` reports, from the client's outcomes and the instances'
// counters, as text and as JSON.
#ifndef LOCKSTEP_TOOLS_BENCH_BENCH_REPORT_H_
#define LOCKSTEP_TOOLS_BENCH_BENCH_REPORT_H_

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/bench/load_generator.h"

namespace lockstep::bench {

struct DraftCounts {
  int64_t proposed = 0;
  int64_t accepted = 0;
};

// Counter deltas of one instance over the run (WorkerService.Stats after minus before).
struct InstanceDelta {
  std::string name;
  std::string role;
  int64_t steps = 0;
  int64_t vetoed_steps = 0;
  int64_t padded_steps = 0;
  int64_t drafts_proposed = 0;
  int64_t drafts_accepted = 0;
  std::map<std::string, DraftCounts> drafts_by_method;
  // Generation steps of requests by K (index): the drafts asked of each sequence-step.
  std::vector<int64_t> draft_k_steps;
  // Generation requests by the K of their next step (index), a gauge: as of the read
  // (not a delta), and its mean over the samples taken during the run (DraftKSampler;
  // none when no sample was taken).
  std::vector<int64_t> draft_k_requests;
  std::vector<double> mean_draft_k_requests;
  int64_t draft_k_request_samples = 0;
  // Acceptance by draft position (entry i: position i + 1): verified generation
  // sequence-steps that proposed that draft, and those that accepted it.
  std::vector<int64_t> draft_position_proposed;
  std::vector<int64_t> draft_position_accepted;
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

// Per-request speculation of one method, from the router's histogram of each finished
// request's acceptance rate (its change over the run).
struct RequestDrafts {
  int64_t requests = 0;         // requests that proposed drafts
  double acceptance_sum = 0;    // the sum of their acceptance rates
};

nlohmann::json MakeReport(const LoadOptions& options, const LoadResult& result,
                          const std::vector<InstanceDelta>& instances,
                          const std::map<std::string, RequestDrafts>& request_drafts = {});
std::string FormatReport(const nlohmann::json& report);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_BENCH_REPORT_H_

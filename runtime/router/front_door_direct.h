// The baseline of front_door_bench's added-latency measurement: the same streams as the
// bench sends through the router, sent straight to an instance leader's
// WorkerService.Generate (gRPC's callback API: no thread per stream), with the cluster
// token of the process (LOCKSTEP_CLUSTER_TOKEN_FILE). What the client sees is recorded
// as the bench records SSE events: the time to the first response with tokens and the
// gaps between later ones.
//
// Thread safety: RunDirect blocks its caller; it is not reentrant.
#ifndef LOCKSTEP_RUNTIME_ROUTER_FRONT_DOOR_DIRECT_H_
#define LOCKSTEP_RUNTIME_ROUTER_FRONT_DOOR_DIRECT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace lockstep::router {

struct DirectLoad {
  std::string worker;  // host:port of the leader
  std::string model;
  std::vector<int> prompt_token_ids;
  int streams = 1;
  int max_tokens = 1;
  absl::Duration timeout = absl::Minutes(5);
};

struct DirectResult {
  int completed = 0;  // finished with every token asked for
  std::map<std::string, int> errors;  // what ended the others, counted
  int64_t responses = 0;  // with tokens
  std::vector<double> first_ms;  // per stream: its start to its first tokens
  std::vector<double> gap_ms;    // between consecutive responses with tokens
  // Per completed stream: (last tokens - first tokens) / (max_tokens - 1), the mean time
  // per token once the first arrived, whatever the responses' sizes.
  std::vector<double> per_token_ms;
  double wall_s = 0;
};

DirectResult RunDirect(const DirectLoad& load);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_FRONT_DOOR_DIRECT_H_

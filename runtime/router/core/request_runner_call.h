// The state of one request in flight in RequestRunner (request_runner.cc runs its
// routes and attempts, request_leg.cc its worker streams). Private to the runner.
//
// Thread safety: a request's continuations run one after another (each starts the next:
// a leg's reactions, the sink's `done`, a Cancel RPC's answer), never at once, so its
// state needs no lock; the flow is shared with the health monitor and the sweeper.
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_RUNNER_CALL_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_RUNNER_CALL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/worker.pb.h"
#include "runtime/router/core/flow_tracker.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/router_request.h"

namespace lockstep::router {

struct RequestRunner::Progress {
  absl::Time start;
  absl::Time last_token;
  bool first_token_seen = false;
  int64_t completion_tokens = 0;
  int64_t cached_prompt_tokens = 0;  // reported by the latest leg that prefilled
  v1::DraftTokens drafts;            // summed over the legs
  // The tokens delivered to the sink, every leg and attempt (what a migration resumes
  // from).
  std::vector<int32_t> tokens;
  // When the last attempt failed, until the next token arrives (migration latency).
  std::optional<absl::Time> failed_at;
};

struct RequestRunner::Call {
  RouterRequest request;
  TokenSink* sink = nullptr;
  std::function<void(RequestResult)> done;
  RequestResult result;
  Progress progress;
  absl::Time deadline;
  std::shared_ptr<FlowHandle> flow;
  v1::GenerateRequest original;  // the first attempt's wire request
  v1::GenerateRequest wire;      // the current attempt's
  std::vector<std::string> attempts;  // each attempt's route, in order
  std::vector<std::string> failed;    // the instances excluded from later attempts
  int migrations = 0;
  bool history_told = false;  // result.status already names the attempts
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_RUNNER_CALL_H_

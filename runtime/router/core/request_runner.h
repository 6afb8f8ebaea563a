// Runs one client request on the instances: picks the route, drives the worker
// Generate stream(s), and streams the tokens to a TokenSink.
//
// Routes. If a healthy aggregated instance exists, the request goes to one (chosen by
// the policy). Otherwise, if healthy context and generation instances exist, it takes
// the two-leg flow: a CONTEXT_ONLY leg on a context instance, whose final response
// carries the first token (streamed to the client at once) and the context handle;
// then a GENERATION_ONLY leg on a generation instance (chosen independently) with that
// handle, the first token and the first draft tokens. Otherwise UNAVAILABLE.
//
// Ends. Every request ends within `request_timeout` (the gRPC deadline of each leg).
// A request also ends, as finished with FINISH_REASON_STOP, when its sink says the
// output is complete (a stop string); it is then cancelled on the worker.
// A leg ends early when the client goes (TokenSink), when its instance becomes
// unhealthy (the health monitor cancels it through the FlowTracker), or when the
// worker reports an error; the result's status then says which, naming the instance.
// A cancelled or failed leg is also cancelled on the worker (Cancel RPC), and a
// two-leg request that does not complete releases the context instance's KV claim.
//
// Migration (runtime/router/core/migration.h). When the instance serving a leg fails (the
// stream breaks, the health monitor ends the leg, or the worker reports an error that
// blames the instance), the request continues on another healthy instance it has not
// failed on, as a continuation of the tokens delivered so far, under a fresh worker
// request id: an aggregated request on an aggregated instance; a two-leg request with
// a fresh context leg (then a generation leg). A generation leg whose KV pull failed
// blames the context instance: the retry takes another context instance (the same one
// if it is the only healthy one left) and may use the same generation instance. The
// client sees one stream; the request's deadline covers all attempts (none starts
// after it); at most `migration_limit` migrations (1 + limit attempts), and none
// without another healthy instance. The final error of a request that migrated names
// its attempts. A client cancel, a stop, a validation error or the deadline never
// migrates.
//
// Threads. Start runs a request on gRPC's callback API: no thread waits for a worker or
// a client while it runs (its worker streams are read by gRPC's callback threads, and a
// sink that cannot take more tokens holds the next read back until it can), so the
// router's threads do not grow with the requests in flight. Run is Start on the calling
// thread's behalf: it blocks that thread, which delivers the tokens to the sink.
//
// Thread safety: thread-safe. The destructor waits for the requests in flight to end
// (their flows are ended first by the owner, so that takes at most a Cancel RPC's
// deadline).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_RUNNER_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "proto/worker.pb.h"
#include "runtime/router/core/flow_tracker.h"
#include "runtime/router/core/instance_progress.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/migration.h"
#include "runtime/router/core/router_metrics.h"
#include "runtime/router/core/router_request.h"
#include "runtime/router/core/worker_stubs.h"
#include "scheduler/sampling_params.h"

namespace lockstep::router {

class RequestRunner {
 public:
  struct Options {
    absl::Duration request_timeout = absl::Minutes(10);
    // Deadline of the best-effort Cancel RPCs.
    absl::Duration cancel_timeout = absl::Seconds(1);
    // Ids that end generation like the engine's EOS (the model's generation_config.json):
    // added to each request's stop tokens unless it ignores EOS.
    std::vector<int32_t> eos_token_ids;
    // Most migrations of one request (router.migration_limit): at most 1 + this many
    // attempts; 0: none.
    int migration_limit = 2;
    // router.max_queued_requests, for the refusals' messages (the registry enforces it).
    int64_t max_queued_requests = 0;
    // Counts each instance's stream responses for the health monitor (none: not counted).
    InstanceProgress* progress = nullptr;
  };

  // Every reference must outlive the runner.
  RequestRunner(Options options, InstanceRegistry& registry, WorkerStubs& stubs, FlowTracker& flows,
                RouterMetrics& metrics, Clock& clock);

  // True when some route exists now (a request would not be refused as UNAVAILABLE),
  // using none of the instances in `exclude`.
  bool CanRoute(absl::Span<const std::string> exclude = {}) const;

  // Whether a request for `model` can start now: UNAVAILABLE without a route; with one,
  // RESOURCE_EXHAUSTED (routing/queue_limit.h, counted as a refusal) when every healthy
  // instance of a role it needs is at router.max_queued_requests. The frontends ask
  // before they answer, so that the refusal is an HTTP 429 / RESOURCE_EXHAUSTED at once.
  // Run checks again when it picks each instance (another request may have taken the
  // last place since): a leg that finds none ends the request the same way.
  absl::Status CheckRoute(std::string_view model);

  // A fresh request id (unique; ids start at the router's start time in µs).
  uint64_t NewRequestId() { return next_request_id_.fetch_add(1); }

  ~RequestRunner();

  // Runs a validated request to its end under `request_id` (from NewRequestId); blocks
  // the calling thread, on which the sink gets the tokens (TokenSink::OnTokens).
  RequestResult Run(const RouterRequest& request, uint64_t request_id, TokenSink& sink);

  // Starts a validated request and returns at once (it may have ended already): `done`
  // is called once with the result, on any thread, after the last use of `sink`
  // (TokenSink::OnTokensAsync), which must live until then.
  void Start(const RouterRequest& request, uint64_t request_id, TokenSink& sink,
             std::function<void(RequestResult)> done);

  // Requests started and not yet done.
  int64_t in_flight() const;

 private:
  struct LegOutcome {
    absl::Status status;
    v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
    std::optional<v1::ContextResult> context;          // CONTEXT_ONLY
    MigrationReason migrate = MigrationReason::kNone;  // when the instance failed
  };
  // The leg of an attempt that failed by its instance (reason kNone: none did).
  struct FailedLeg {
    MigrationReason reason = MigrationReason::kNone;
    std::string instance;
    config::InstanceRole role = config::InstanceRole::kAggregated;
  };
  // The failure of a leg that ended with `status` (none when OK).
  static FailedLeg LegFailure(const absl::Status& status, MigrationReason migrate,
                              const std::string& instance, config::InstanceRole role);
  // Per-request progress shared by the legs (tokens, timing, metrics).
  struct Progress;
  // One request in flight: what it runs, its progress and its continuation state.
  struct Call;
  using CallPtr = std::shared_ptr<Call>;
  // The reactor reading one leg's Generate stream (request_leg.cc).
  class Leg;
  using LegDone = std::function<void(LegOutcome)>;
  using FailedLegDone = std::function<void(FailedLeg)>;

  // Runs one leg of `call` on `target`; `done` gets its outcome (request_leg.cc).
  void RunLeg(const CallPtr& call, const InstanceTarget& target, v1::GenerateRequest request,
              LegDone done);
  // Starts an attempt (the first, then each migration) of `call`'s current wire request.
  void StartAttempt(const CallPtr& call);
  // Routes the wire request (its type set per leg) avoiding the instances `call` failed
  // on and runs its legs; sets result's status, finish reason and route (this attempt's
  // instances, "ctx0->gen1"; empty when no leg started); then `done` gets the leg that
  // failed by its instance.
  void RunAttempt(const CallPtr& call, FailedLegDone done);
  // The two-leg flow after the context leg ended with `leg1`.
  void AfterContextLeg(const CallPtr& call, const InstanceTarget& ctx, LegOutcome leg1,
                       FailedLegDone done);
  // After an attempt: ends the request or starts its migration.
  void AttemptDone(const CallPtr& call, const FailedLeg& failure);
  // The bookkeeping at the end of a request; calls its `done`.
  void Finish(const CallPtr& call);
  // True when the next attempt may use `failure`'s instance again: a failed KV pull
  // from a context instance that is still healthy and the only one left besides
  // `failed` (the pull may have failed for a passing reason). Every other failure
  // excludes its instance.
  bool RetriesOnSameInstance(const FailedLeg& failure, absl::Span<const std::string> failed) const;
  // The worker request `id` for `prompt` and `sampling` (the model's EOS added to the
  // stop tokens unless the request ignores EOS).
  v1::GenerateRequest WireRequest(const std::string& model, absl::Span<const int32_t> prompt,
                                  const sched::SamplingParams& sampling, uint64_t id) const;
  // True (finishing `result`) when the tokens delivered already end `original`: its
  // max_tokens, or a stop token once min_tokens were generated.
  bool OutputComplete(const v1::GenerateRequest& original, const Progress& progress,
                      RequestResult& result) const;
  // registry_.Acquire, counting the decision (and a refusal for the queue limit); a leg routed with
  // `prompt` carries the chosen rank hint in `wire` (none without).
  absl::StatusOr<InstanceTarget> Route(config::InstanceRole role,
                                       absl::Span<const std::string> exclude,
                                       v1::GenerateRequest& wire, bool by_prompt);
  // The leg `request` on `target` is served by `rank`: the hint's outcome and the prefix
  // the index showed cached there.
  void NoteServingRank(const InstanceTarget& target, const v1::GenerateRequest& request,
                       int32_t rank);
  // Best-effort Cancel RPC to `target` for `request_id` (bounded by cancel_timeout);
  // `then` runs when it was answered or failed.
  void CancelOnWorker(const InstanceTarget& target, uint64_t request_id,
                      std::function<void()> then);
  // Counts `delta` and hands it to the sink; `then` gets the sink's action.
  void Deliver(Call& call, const TokenDelta& delta, std::function<void(SinkAction)> then);

  const Options options_;
  InstanceRegistry& registry_;
  WorkerStubs& stubs_;
  FlowTracker& flows_;
  RouterMetrics& metrics_;
  Clock& clock_;
  std::atomic<uint64_t> next_request_id_;
  mutable absl::Mutex mu_;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_REQUEST_RUNNER_H_

// A fake instance leader for router tests: a real WorkerService on a real gRPC server
// (127.0.0.1, a free port) in the test process, generating deterministic tokens with
// no model. It can register and heartbeat with a router, stall streams, fail requests,
// report any health state, and be shut down mid-stream.
//
// Tokens: the token at generated position p of a prompt is TokenAt(prompt, p), a
// lower-case letter. AGGREGATED streams positions 0..max_tokens-1 one token per
// response; CONTEXT_ONLY hands off with position 0 as the first token (and positions
// 1..3 as draft tokens); GENERATION_ONLY checks the handle and the first token, then
// streams positions 1..max_tokens-1 (after "pulling" the KV when SetKvPull says so). A
// token in stop_token_ids ends with STOP. A
// continuation (sampling.num_generated_in_prompt = g) is the original prompt followed
// by its first g tokens and generates from position g on, as the original would.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TESTING_FAKE_WORKER_H_
#define LOCKSTEP_RUNTIME_ROUTER_TESTING_FAKE_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/router.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace lockstep::router::testing {

class FakeWorker final : public v1::WorkerService::Service {
 public:
  struct Options {
    std::string name = "agg0";
    v1::InstanceRole role = v1::INSTANCE_ROLE_AGGREGATED;
    int32_t world_size = 1;
    std::string model = "tiny";
    std::string listen = "127.0.0.1:0";  // port 0: a free port
    // Sizes its gRPC receive limit as a worker does (config/message_limits.h).
    int64_t max_prompt_tokens = 2048;
  };

  static absl::StatusOr<std::unique_ptr<FakeWorker>> Start(Options options);
  ~FakeWorker() override;

  static int32_t TokenAt(const std::vector<int32_t>& prompt, int position);
  // The text the fake generates for `prompt` (as bytes) with `max_tokens`.
  static std::string ExpectedText(const std::string& prompt, int max_tokens);

  const std::string& address() const { return address_; }
  const std::string& name() const { return options_.name; }

  absl::Status Register(const std::string& router_address);
  // One heartbeat; returns the router's reregister flag.
  absl::StatusOr<bool> Heartbeat(const std::string& router_address);
  // Heartbeats every `interval` on a thread, registering again when told to.
  void StartHeartbeats(const std::string& router_address, absl::Duration interval);
  void StopHeartbeats();

  // Streams stop producing after `tokens` tokens (-1: never) and wait until cancelled.
  void SetStallAfter(int tokens) ABSL_LOCKS_EXCLUDED(mu_);
  // While held, a stream waits before its first token until the hold is lifted (then it
  // runs as usual) or it is cancelled (bounded).
  void SetHold(bool hold) ABSL_LOCKS_EXCLUDED(mu_);
  void SetHealth(v1::HealthResponse::State state) ABSL_LOCKS_EXCLUDED(mu_);
  // Every Generate ends with this error (code 0: none); a held stream looks again when
  // the hold is lifted.
  void SetFailure(int code, const std::string& message) ABSL_LOCKS_EXCLUDED(mu_);
  // With `code` != 0, a GENERATION_ONLY leg first pulls its KV: a Health RPC to the
  // handle's transfer address (bounded). When that fails, or for the next `fail_next`
  // pulls regardless, the leg ends as a worker's failed receive does: error `code`
  // with kv_pull_failed set. 0: no pull (the default).
  void SetKvPull(int code, int fail_next = 0) ABSL_LOCKS_EXCLUDED(mu_);
  // Every response of a stream reports this many prompt tokens as reused from a prefix
  // cache, GENERATION_ONLY legs' too, as given (more than the prompt or negative, as a
  // faulty worker might); 0 by default.
  void SetCachedPromptTokens(int64_t tokens) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the server at once; open streams end with an error at the client.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  std::vector<v1::GenerateRequest> requests() const ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint64_t> cancel_rpcs() const ABSL_LOCKS_EXCLUDED(mu_);
  int streams_cancelled() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits (bounded) until `n` streams are stalled / a Cancel RPC for `id` arrived / at
  // least `n` streams were cancelled by the client.
  bool AwaitStalled(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits (bounded) until `n` streams are waiting on the hold.
  bool AwaitHeld(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  int held() const ABSL_LOCKS_EXCLUDED(mu_);
  // Tokens written to all streams so far.
  int64_t tokens_sent() const ABSL_LOCKS_EXCLUDED(mu_);
  bool AwaitCancelRpc(uint64_t id, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  bool AwaitStreamsCancelled(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status Health(grpc::ServerContext* context, const v1::HealthRequest* request,
                      v1::HealthResponse* response) override;
  grpc::Status Stats(grpc::ServerContext* context, const v1::StatsRequest* request,
                     v1::StatsResponse* response) override;
  grpc::Status Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;

 private:
  explicit FakeWorker(Options options) : options_(std::move(options)) {}
  // Blocks while stalled until the call is cancelled or the worker shuts down (bounded).
  void WaitWhileStalled(grpc::ServerContext& context) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks while held; false when the call was cancelled (or the worker shuts down).
  bool WaitWhileHeld(grpc::ServerContext& context) ABSL_LOCKS_EXCLUDED(mu_);
  // The error of a failed KV pull of `context`, or OK (see SetKvPull).
  absl::Status PullKv(const v1::ContextHandle& context) ABSL_LOCKS_EXCLUDED(mu_);
  std::unique_ptr<v1::RouterService::Stub> RouterStub(const std::string& router_address);

  const Options options_;
  std::string address_;
  std::unique_ptr<grpc::Service> checked_service_;  // this service behind the cluster token
  std::unique_ptr<grpc::Server> server_;

  mutable absl::Mutex mu_;
  int stall_after_ ABSL_GUARDED_BY(mu_) = -1;
  int stalled_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  v1::HealthResponse::State health_ ABSL_GUARDED_BY(mu_) = v1::HealthResponse::STATE_SERVING;
  int failure_code_ ABSL_GUARDED_BY(mu_) = 0;
  std::string failure_message_ ABSL_GUARDED_BY(mu_);
  int kv_pull_code_ ABSL_GUARDED_BY(mu_) = 0;
  int kv_pull_fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cached_prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::GenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancel_rpcs_ ABSL_GUARDED_BY(mu_);
  int streams_cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;

  std::unique_ptr<absl::Notification> heartbeat_stop_;
  std::thread heartbeat_thread_;
};

}  // namespace lockstep::router::testing

#endif  // LOCKSTEP_RUNTIME_ROUTER_TESTING_FAKE_WORKER_H_

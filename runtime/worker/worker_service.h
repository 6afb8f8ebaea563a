// WorkerService (proto/worker.proto) on an instance's leader rank, on gRPC's callback
// API: no handler blocks and no call holds a thread. Each handler only validates,
// converts and talks to the executor through its thread-safe edges: the inbox
// (requests, cancels, drain) and the published snapshot; responses come back through
// RequestStreams to a GenerateStream (generate_stream.h), which streams until the
// request's final response, the client cancels (then the request is cancelled in the
// instance), or the request deadline passes.
#ifndef LOCKSTEP_RUNTIME_WORKER_WORKER_SERVICE_H_
#define LOCKSTEP_RUNTIME_WORKER_WORKER_SERVICE_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "kvcache/block_layout.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/engine/cpu/expert_load.h"
#include "runtime/executor/executor.h"
#include "runtime/worker/deadline_timers.h"
#include "runtime/worker/request_streams.h"
#include "runtime/worker/wake_pool.h"

namespace lockstep::worker {

// The state Health reports, decided by the worker's loop.
struct HealthView {
  v1::HealthResponse::State state = v1::HealthResponse::STATE_SERVING;
  std::string message;
};

struct WorkerServiceOptions {
  std::string instance;
  std::string model;  // the served model name; a request naming another is refused
  absl::Duration request_timeout = absl::Minutes(10);
  // How long a cancelled request's stream waits for its final response.
  absl::Duration cancel_grace = absl::Seconds(5);
  // Threads that start the streams' writes when the executor pushes responses.
  int write_threads = 2;
  Clock* clock = nullptr;
  exec::Executor* executor = nullptr;  // its inbox() and Snapshot() only
  kv::BlockLayout target_layout;       // the target KV pool's, for Stats
  RequestStreams* streams = nullptr;
  std::function<HealthView()> health;
  // The instance's expert-load windows for Stats (not owned); null: none measured.
  const engine::ExpertLoadBoard* expert_loads = nullptr;
};

// Thread safety: handlers run concurrently on gRPC's threads. The service (and its one
// timer thread) must outlive the server's calls: shut the server down first.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(WorkerServiceOptions options)
      : options_(std::move(options)), wake_(options_.write_threads) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context,
                                   const v1::CancelRequest* request,
                                   v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* context,
                                   const v1::HealthRequest* request,
                                   v1::HealthResponse* response) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const v1::StatsRequest* request,
                                  v1::StatsResponse* response) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* context,
                                  const v1::DrainRequest* request,
                                  v1::DrainResponse* response) override;

 private:
  grpc::Status DoCancel(const v1::CancelRequest& request, v1::CancelResponse* response);
  void DoHealth(v1::HealthResponse* response);
  void DoStats(v1::StatsResponse* response);
  void DoDrain(v1::DrainResponse* response);

  const WorkerServiceOptions options_;
  DeadlineTimers timers_;  // the Generate streams' deadlines
  WakePool wake_;          // where pushes wake the streams (destroyed first)
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_WORKER_SERVICE_H_

// WorkerService (proto/worker.proto) on an instance's leader rank. Each handler only
// validates, converts and talks to the executor through its thread-safe edges: the
// inbox (requests, cancels, drain) and the published snapshot; responses come back
// through RequestStreams. Generate streams until the request's final response, the
// client cancels (then the request is cancelled in the instance), or the request
// deadline passes. No handler ever waits without a deadline.
#ifndef LOCKSTEP_RUNTIME_WORKER_WORKER_SERVICE_H_
#define LOCKSTEP_RUNTIME_WORKER_WORKER_SERVICE_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/worker.grpc.pb.h"
#include "runtime/executor/executor.h"
#include "runtime/worker/request_streams.h"

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
  Clock* clock = nullptr;
  exec::Executor* executor = nullptr;  // its inbox() and Snapshot() only
  RequestStreams* streams = nullptr;
  std::function<HealthView()> health;
};

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  explicit WorkerServiceImpl(WorkerServiceOptions options) : options_(std::move(options)) {}

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
  const WorkerServiceOptions options_;
};

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_WORKER_SERVICE_H_

// RouterService (proto/router.proto): generation for gRPC clients, with the same
// validation as the HTTP API (INVALID_ARGUMENT naming the field; UNAVAILABLE with no
// route), membership for instance leaders (Register, Heartbeat, ListInstances), and
// their KV events (ReportKvEvents, to KvRouting).
// A client that cancels its Generate call cancels the request on the workers (the
// sweeper sees the call cancelled). A client that stops reading its stream stalls the
// router's writes once gRPC's flow-control windows are full; a write that makes no
// progress for `write_timeout` cancels the call (the sweeper sees the write pending for
// tokens; an alarm guards the final message), which frees its thread and cancels the
// request on its worker.
//
// Thread safety: thread-safe (gRPC calls the methods from its own threads).
#ifndef LOCKSTEP_RUNTIME_ROUTER_GRPC_FRONTEND_H_
#define LOCKSTEP_RUNTIME_ROUTER_GRPC_FRONTEND_H_

#include "absl/time/time.h"
#include <memory>

#include "common/clock.h"
#include "proto/router.grpc.pb.h"
#include "runtime/router/core/instance_registry.h"
#include "runtime/router/core/request_runner.h"
#include "runtime/router/core/request_validation.h"
#include "runtime/router/core/router_metrics.h"
#include "runtime/router/routing/admission.h"
#include "runtime/router/routing/kv_routing.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "runtime/security/api_keys.h"

namespace lockstep::router {

class GrpcFrontend final : public v1::RouterService::Service {
 public:
  struct Options {
    RequestLimits limits;
    absl::Duration heartbeat_interval = absl::Milliseconds(500);
    absl::Duration heartbeat_timeout = absl::Seconds(2);
    // Generate's clients send `authorization: Bearer KEY` metadata (none: anyone).
    security::ApiKeys api_keys;
    // Shared with the HTTP frontend; the default admits every request.
    std::shared_ptr<Admission> admission = std::make_shared<Admission>(0);
    // Generate calls at once (each holds a gRPC thread); the default admits every call.
    std::shared_ptr<Admission> generate_calls = std::make_shared<Admission>(0);
    // Where ReportKvEvents goes (not owned; null: refused as UNIMPLEMENTED).
    KvRouting* kv_routing = nullptr;
    // A Generate write stalled this long ends the call (router.http_write_timeout_ms).
    absl::Duration write_timeout = absl::Seconds(10);
  };

  // Every reference must outlive the frontend.
  GrpcFrontend(Options options, RequestRunner& runner, InstanceRegistry& registry,
               RouterMetrics& metrics, const ServingTokenizer& tokenizer, Clock& clock);

  grpc::Status Generate(grpc::ServerContext* context, const v1::RouterGenerateRequest* request,
                        grpc::ServerWriter<v1::RouterGenerateResponse>* writer) override;
  grpc::Status ListInstances(grpc::ServerContext* context, const v1::ListInstancesRequest* request,
                             v1::ListInstancesResponse* response) override;
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status ReportKvEvents(grpc::ServerContext* context,
                              const v1::ReportKvEventsRequest* request,
                              v1::ReportKvEventsResponse* response) override;

 private:
  const Options options_;
  RequestRunner& runner_;
  InstanceRegistry& registry_;
  RouterMetrics& metrics_;
  const ServingTokenizer& tokenizer_;
  Clock& clock_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_GRPC_FRONTEND_H_

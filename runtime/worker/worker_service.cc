#include "runtime/worker/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "runtime/worker/draft_stats.h"
#include "runtime/worker/expert_load_stats.h"
#include "runtime/worker/generate_stream.h"
#include "runtime/worker/proto_convert.h"
#include "runtime/worker/rank_stats.h"

namespace lockstep::worker {

namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerServiceImpl::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  Clock& clock = *options_.clock;
  if (!request->model().empty() && request->model() != options_.model) {
    return GenerateStream::Refuse(
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("model '", request->model(), "' is not served here (",
                                  options_.model, " is)")));
  }
  absl::StatusOr<exec::NewRequestSpec> spec = ToRequestSpec(*request, clock.Now());
  if (!spec.ok()) return GenerateStream::Refuse(ToGrpcStatus(spec.status()));
  if (options_.health().state == v1::HealthResponse::STATE_DRAINING) {
    return GenerateStream::Refuse(grpc::Status(
        grpc::StatusCode::UNAVAILABLE, absl::StrCat("instance ", options_.instance, " is draining")));
  }
  const RequestId id = spec->id;
  absl::StatusOr<std::shared_ptr<ResponseQueue>> queue = options_.streams->Open(id);
  if (!queue.ok()) return GenerateStream::Refuse(ToGrpcStatus(queue.status()));
  options_.executor->inbox().Push(*std::move(spec));
  GenerateStreamDeps deps;
  deps.clock = options_.clock;
  deps.executor = options_.executor;
  deps.streams = options_.streams;
  deps.timers = &timers_;
  deps.wake = &wake_;
  deps.request_timeout = options_.request_timeout;
  deps.cancel_grace = options_.cancel_grace;
  return GenerateStream::Start(deps, context, id, *std::move(queue));
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Cancel(grpc::CallbackServerContext* context,
                                                    const v1::CancelRequest* request,
                                                    v1::CancelResponse* response) {
  return Done(context, DoCancel(*request, response));
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Health(grpc::CallbackServerContext* context,
                                                    const v1::HealthRequest*,
                                                    v1::HealthResponse* response) {
  DoHealth(response);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Stats(grpc::CallbackServerContext* context,
                                                   const v1::StatsRequest*,
                                                   v1::StatsResponse* response) {
  DoStats(response);
  return Done(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Drain(grpc::CallbackServerContext* context,
                                                   const v1::DrainRequest*,
                                                   v1::DrainResponse* response) {
  DoDrain(response);
  return Done(context, grpc::Status::OK);
}

grpc::Status WorkerServiceImpl::DoCancel(const v1::CancelRequest& request,
                                         v1::CancelResponse* response) {
  if (request.request_id() == 0 || request.request_id() > static_cast<uint64_t>(INT64_MAX)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id out of range");
  }
  options_.executor->inbox().Cancel(RequestId(static_cast<int64_t>(request.request_id())));
  response->set_found(true);
  return grpc::Status::OK;
}

void WorkerServiceImpl::DoHealth(v1::HealthResponse* response) {
  const exec::ExecutorSnapshot snap = options_.executor->Snapshot();
  const HealthView view = options_.health();
  response->set_state(view.state);
  response->set_message(view.message);
  response->set_instance(options_.instance);
  response->set_step_count(snap.step);
  response->set_last_step_unix_nanos(absl::ToUnixNanos(snap.last_step_time));
}

void WorkerServiceImpl::DoStats(v1::StatsResponse* response) {
  const exec::ExecutorSnapshot snap = options_.executor->Snapshot();
  const exec::ExecutorCounters& c = snap.instance_counters;
  response->set_instance(options_.instance);
  SetInstanceCounters(snap, response);
  SetDraftStats(options_.executor->speculative(), c, response);
  SetRankStats(snap, response);
  if (options_.expert_loads != nullptr) {
    SetExpertLoadStats(options_.expert_loads->Latest(), response);
  }
  SetKvShape(options_.target_layout, response);
  for (size_t r = 0; r < snap.free_target_blocks.size(); ++r) {
    v1::PoolStats* p = response->add_pools();
    p->set_rank(static_cast<int32_t>(r));
    p->set_pool("target");
    p->set_free_blocks(snap.free_target_blocks[r]);
    p->set_total_blocks(snap.kv.target.total_blocks);
    p->set_used_blocks(snap.used_target_blocks[r]);
    if (snap.kv.draft.has_value()) {
      v1::PoolStats* d = response->add_pools();
      d->set_rank(static_cast<int32_t>(r));
      d->set_pool("draft");
      d->set_free_blocks(snap.free_draft_blocks[r]);
      d->set_total_blocks(snap.kv.draft->total_blocks);
      d->set_used_blocks(snap.used_draft_blocks[r]);
    }
  }
}

void WorkerServiceImpl::DoDrain(v1::DrainResponse* response) {
  const exec::ExecutorSnapshot snap = options_.executor->Snapshot();
  options_.executor->inbox().Drain();
  response->set_active_requests(snap.active_requests + snap.queued_requests);
}

}  // namespace lockstep::worker

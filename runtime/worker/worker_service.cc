#include "runtime/worker/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "runtime/worker/draft_stats.h"
#include "runtime/worker/proto_convert.h"
#include "runtime/worker/rank_stats.h"

namespace lockstep::worker {

grpc::Status WorkerServiceImpl::Generate(grpc::ServerContext* context,
                                         const v1::GenerateRequest* request,
                                         grpc::ServerWriter<v1::GenerateResponse>* writer) {
  Clock& clock = *options_.clock;
  if (!request->model().empty() && request->model() != options_.model) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("model '", request->model(), "' is not served here (",
                                     options_.model, " is)"));
  }
  absl::StatusOr<exec::NewRequestSpec> spec = ToRequestSpec(*request, clock.Now());
  if (!spec.ok()) return ToGrpcStatus(spec.status());
  if (options_.health().state == v1::HealthResponse::STATE_DRAINING) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("instance ", options_.instance, " is draining"));
  }
  const RequestId id = spec->id;
  absl::StatusOr<std::shared_ptr<ResponseQueue>> queue = options_.streams->Open(id);
  if (!queue.ok()) return ToGrpcStatus(queue.status());
  options_.executor->inbox().Push(*std::move(spec));

  const absl::Time deadline = clock.Now() + options_.request_timeout;
  absl::Time cancel_deadline = absl::InfiniteFuture();
  bool cancel_sent = false;
  auto cancel = [&](absl::Duration grace) {
    if (cancel_sent) return;
    options_.executor->inbox().Cancel(id);
    cancel_sent = true;
    cancel_deadline = clock.Now() + grace;
  };
  while (true) {
    if (context->IsCancelled()) cancel(absl::Seconds(5));
    const absl::Time now = clock.Now();
    if (now >= deadline && !cancel_sent) cancel(absl::Seconds(5));
    if (now >= cancel_deadline) {
      options_.streams->Close(id);
      return context->IsCancelled()
                 ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client")
                 : grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                absl::StrCat("request ", id.value(), " did not finish within ",
                                             absl::FormatDuration(options_.request_timeout)));
    }
    // The request and cancel deadlines are on the injected clock; the read waits in real
    // time, at most a 100 ms slice and at most what is left until the cancel deadline.
    std::optional<exec::Response> next =
        (*queue)->Next(std::min(absl::Milliseconds(100), cancel_deadline - now));
    if (!next.has_value()) continue;
    v1::GenerateResponse out = ToProto(*next);
    SetRequestDrafts(options_.executor->spec_method(), *next, &out);
    if (!cancel_sent && !writer->Write(out)) cancel(absl::Seconds(5));  // the client left
    if (out.finished()) {
      options_.streams->Close(id);
      return grpc::Status::OK;
    }
  }
}

grpc::Status WorkerServiceImpl::Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                                       v1::CancelResponse* response) {
  if (request->request_id() == 0 || request->request_id() > static_cast<uint64_t>(INT64_MAX)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id out of range");
  }
  options_.executor->inbox().Cancel(RequestId(static_cast<int64_t>(request->request_id())));
  response->set_found(true);
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Health(grpc::ServerContext*, const v1::HealthRequest*,
                                       v1::HealthResponse* response) {
  const exec::ExecutorSnapshot snap = options_.executor->Snapshot();
  const HealthView view = options_.health();
  response->set_state(view.state);
  response->set_message(view.message);
  response->set_instance(options_.instance);
  response->set_step_count(snap.step);
  response->set_last_step_unix_nanos(absl::ToUnixNanos(snap.last_step_time));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Stats(grpc::ServerContext*, const v1::StatsRequest*,
                                      v1::StatsResponse* response) {
  const exec::ExecutorSnapshot snap = options_.executor->Snapshot();
  const exec::ExecutorCounters& c = snap.instance_counters;
  response->set_instance(options_.instance);
  response->set_steps(c.steps);
  response->set_vetoed_steps(c.vetoed_steps);
  response->set_padded_steps(c.padded_steps);
  response->set_deferred_updates(c.deferred_updates);
  response->set_stale_updates(c.stale_updates);
  response->set_active_requests(snap.active_requests);
  response->set_queued_requests(snap.queued_requests);
  response->set_draft_tokens_proposed(c.drafts_proposed);
  response->set_draft_tokens_accepted(c.drafts_accepted);
  response->set_prompt_tokens(c.prompt_tokens);
  response->set_generated_tokens(c.generated_tokens);
  response->set_audit_violations(c.audit_violations);
  response->set_kv_bytes_received(c.kv_bytes_received);
  response->set_kv_receive_micros(c.kv_receive_micros);
  response->set_transfers_received(c.transfers_received);
  response->set_transfers_sent(c.transfers_sent);
  response->set_transfer_failures(c.transfer_failures);
  response->set_rank_errors(c.errors);
  response->set_error_steps(c.error_steps);
  response->set_dummy_updates_dropped(c.dummy_updates_dropped);
  response->set_engine_failures(c.engine_failures);
  SetDraftStats(options_.executor->speculative(), c, response);
  SetRankStats(snap, response);
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
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Drain(grpc::ServerContext*, const v1::DrainRequest*,
                                      v1::DrainResponse* response) {
  const exec::ExecutorSnapshot snap = options_.executor->Snapshot();
  options_.executor->inbox().Drain();
  response->set_active_requests(snap.active_requests + snap.queued_requests);
  return grpc::Status::OK;
}

}  // namespace lockstep::worker

#include "runtime/worker/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "runtime/config/sampling_wire.h"

namespace lockstep::worker {
namespace {

v1::FinishReason ToProto(sched::FinishReason reason) {
  switch (reason) {
    case sched::FinishReason::kNone:
      return v1::FINISH_REASON_UNSPECIFIED;
    case sched::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case sched::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case sched::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case sched::FinishReason::kError:
      return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_ERROR;
}

void SetLogprobs(const std::vector<engine::TokenLogprob>& in, v1::TokenLogprobs* out) {
  if (in.empty()) return;
  out->set_token_id(in[0].token);
  out->set_logprob(in[0].logprob);
  for (size_t i = 1; i < in.size(); ++i) {
    v1::TopLogprob* top = out->add_top();
    top->set_token_id(in[i].token);
    top->set_logprob(in[i].logprob);
  }
}

}  // namespace

absl::StatusOr<exec::NewRequestSpec> ToRequestSpec(const v1::GenerateRequest& request,
                                                   absl::Time now) {
  exec::NewRequestSpec spec;
  if (request.request_id() == 0 || request.request_id() > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id must be in [1, 2^63), got ", request.request_id()));
  }
  spec.id = RequestId(static_cast<int64_t>(request.request_id()));
  spec.prompt.assign(request.prompt_token_ids().begin(), request.prompt_token_ids().end());
  spec.sampling = config::SamplingFromWire(request.sampling());
  const int32_t generated = spec.sampling.num_generated_in_prompt;
  if (generated < 0 || generated > static_cast<int64_t>(spec.prompt.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.num_generated_in_prompt must be in [0, prompt length = ",
                     spec.prompt.size(), "], got ", generated));
  }
  spec.arrival = now;
  if (request.has_rank_hint() && request.rank_hint() >= 0) spec.preferred_rank = request.rank_hint();
  switch (request.type()) {
    case v1::REQUEST_TYPE_AGGREGATED:
      spec.type = sched::RequestType::kAggregated;
      break;
    case v1::REQUEST_TYPE_CONTEXT_ONLY:
      spec.type = sched::RequestType::kContextOnly;
      break;
    case v1::REQUEST_TYPE_GENERATION_ONLY: {
      spec.type = sched::RequestType::kGenerationOnly;
      if (!request.has_context() || !request.context().has_handle()) {
        return absl::InvalidArgumentError(
            "context: a GENERATION_ONLY request needs the context leg's result");
      }
      const v1::ContextResult& c = request.context();
      sched::ContextSource source;
      source.instance = c.handle().instance();
      source.rank = c.handle().rank();
      source.address = c.handle().transfer_address();
      if (c.handle().context_request_id() > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError("context.handle.context_request_id is out of range");
      }
      source.remote_id = RequestId(static_cast<int64_t>(c.handle().context_request_id()));
      source.lease_expiry = absl::FromUnixNanos(c.handle().lease_expiry_unix_nanos());
      source.first_token = c.first_token_id();
      source.first_drafts.assign(c.draft_token_ids().begin(), c.draft_token_ids().end());
      if (source.address.empty()) {
        return absl::InvalidArgumentError("context.handle.transfer_address is empty");
      }
      spec.context_source = std::move(source);
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("type: unknown request type ", static_cast<int>(request.type())));
  }
  return spec;
}

v1::GenerateResponse ToProto(const exec::Response& r) {
  v1::GenerateResponse out;
  out.set_request_id(static_cast<uint64_t>(r.id.value()));
  out.set_step_id(r.step);
  out.set_rank(r.rank);
  out.set_cached_prompt_tokens(r.cached_prompt_tokens);
  if (r.context.has_value() && !r.finished) {
    // A context leg hands off: the first token travels only in the context result.
    out.set_finished(true);
    out.set_finish_reason(v1::FINISH_REASON_HANDOFF);
    v1::ContextResult* c = out.mutable_context();
    v1::ContextHandle* h = c->mutable_handle();
    h->set_instance(r.context->instance);
    h->set_rank(r.context->rank);
    h->set_transfer_address(r.context->address);
    h->set_context_request_id(static_cast<uint64_t>(r.context->remote_id.value()));
    h->set_lease_expiry_unix_nanos(absl::ToUnixNanos(r.context->lease_expiry));
    h->set_num_prompt_tokens(static_cast<int32_t>(r.num_prompt_tokens));
    c->set_first_token_id(r.context->first_token);
    if (!r.logprobs.empty()) SetLogprobs(r.logprobs[0], c->mutable_first_logprobs());
    for (int32_t d : r.context->first_drafts) c->add_draft_token_ids(d);
    return out;
  }
  for (int32_t t : r.tokens) out.add_token_ids(t);
  for (const auto& lp : r.logprobs) SetLogprobs(lp, out.add_logprobs());
  out.set_finished(r.finished);
  out.set_finish_reason(r.finished ? ToProto(r.finish_reason) : v1::FINISH_REASON_UNSPECIFIED);
  if (!r.status.ok()) {
    out.set_error_code(static_cast<int32_t>(r.status.code()));
    out.set_error_message(std::string(r.status.message()));
    out.set_kv_pull_failed(r.kv_pull_failed);
  }
  return out;
}

}  // namespace lockstep::worker

#include "runtime/executor/response.h"

#include "runtime/executor/wire.h"

namespace lockstep::exec {

std::string EncodeResponses(absl::Span<const Response> responses) {
  WireWriter w;
  w.Put<uint32_t>(static_cast<uint32_t>(responses.size()));
  for (const Response& r : responses) {
    w.Put(r.id.value());
    w.Put(r.rank);
    w.Put(r.step);
    w.PutVector(r.tokens);
    w.Put<uint32_t>(static_cast<uint32_t>(r.logprobs.size()));
    for (const auto& lp : r.logprobs) w.PutVector(lp);
    w.Put<uint8_t>(r.finished);
    w.Put<uint8_t>(static_cast<uint8_t>(r.finish_reason));
    w.Put<int32_t>(static_cast<int32_t>(r.status.code()));
    w.PutString(r.status.message());
    w.Put<uint8_t>(r.kv_pull_failed);
    w.Put<uint8_t>(r.context.has_value());
    if (r.context) {
      w.PutString(r.context->instance);
      w.Put(r.context->rank);
      w.PutString(r.context->address);
      w.Put(r.context->remote_id.value());
      w.Put(absl::ToUnixNanos(r.context->lease_expiry));
      w.Put(r.context->first_token);
      w.PutVector(r.context->first_drafts);
    }
    w.Put(r.num_prompt_tokens);
    w.Put(r.cached_prompt_tokens);
    w.Put(r.drafts_proposed);
    w.Put(r.drafts_accepted);
  }
  return w.Take();
}

absl::StatusOr<std::vector<Response>> DecodeResponses(const std::string& bytes) {
  WireReader rd(bytes);
  uint32_t n = 0;
  if (!rd.Get(&n)) return absl::DataLossError("responses: truncated count");
  std::vector<Response> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    Response r;
    int64_t id = 0;
    uint32_t num_lp = 0;
    uint8_t finished = 0, reason = 0, has_context = 0, kv_pull_failed = 0;
    int32_t code = 0;
    std::string message;
    bool ok = rd.Get(&id) && rd.Get(&r.rank) && rd.Get(&r.step) && rd.GetVector(&r.tokens) &&
              rd.Get(&num_lp);
    for (uint32_t j = 0; ok && j < num_lp; ++j) {
      r.logprobs.emplace_back();
      ok = rd.GetVector(&r.logprobs.back());
    }
    ok = ok && rd.Get(&finished) && rd.Get(&reason) && rd.Get(&code) && rd.GetString(&message) &&
         rd.Get(&kv_pull_failed) && rd.Get(&has_context) &&
         reason <= static_cast<uint8_t>(sched::FinishReason::kError);
    if (ok && has_context) {
      sched::ContextSource c;
      int64_t remote = 0, lease = 0;
      ok = rd.GetString(&c.instance) && rd.Get(&c.rank) && rd.GetString(&c.address) &&
           rd.Get(&remote) && rd.Get(&lease) && rd.Get(&c.first_token) &&
           rd.GetVector(&c.first_drafts);
      c.remote_id = RequestId(remote);
      c.lease_expiry = absl::FromUnixNanos(lease);
      r.context = std::move(c);
    }
    ok = ok && rd.Get(&r.num_prompt_tokens) && rd.Get(&r.cached_prompt_tokens) &&
         rd.Get(&r.drafts_proposed) && rd.Get(&r.drafts_accepted);
    if (!ok) return absl::DataLossError("responses: malformed response");
    r.id = RequestId(id);
    r.finished = finished != 0;
    r.kv_pull_failed = kv_pull_failed != 0;
    r.finish_reason = static_cast<sched::FinishReason>(reason);
    r.status = absl::Status(static_cast<absl::StatusCode>(code), message);
    out.push_back(std::move(r));
  }
  if (!rd.done()) return absl::DataLossError("responses: trailing bytes");
  return out;
}

std::string EncodeGatherPart(absl::Span<const Response> responses, const kv::KvEventDelta& events) {
  WireWriter w;
  w.PutString(EncodeResponses(responses));
  w.PutVector(events.committed);
  w.PutVector(events.evicted);
  return w.Take();
}

absl::Status DecodeGatherPart(const std::string& bytes, std::vector<Response>* responses,
                              kv::KvEventDelta* events) {
  WireReader rd(bytes);
  std::string encoded;
  if (!rd.GetString(&encoded) || !rd.GetVector(&events->committed) ||
      !rd.GetVector(&events->evicted) || !rd.done()) {
    return absl::DataLossError("response gather: malformed part");
  }
  absl::StatusOr<std::vector<Response>> decoded = DecodeResponses(encoded);
  if (!decoded.ok()) return decoded.status();
  *responses = *std::move(decoded);
  return absl::OkStatus();
}

}  // namespace lockstep::exec

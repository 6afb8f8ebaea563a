#include "runtime/executor/response.h"

#include "runtime/executor/context_source_codec.h"
#include "runtime/executor/field_count.h"
#include "runtime/executor/wire.h"

namespace lockstep::exec {
namespace {

static_assert(FieldCount<Response>() == 14,
              "a field was added to Response: encode and decode it below, then update the count");
static_assert(FieldCount<engine::TokenLogprob>() == 2,
              "TokenLogprob travels as raw bytes (PutVector): check that a new field may");
static_assert(FieldCount<kv::KvEventDelta>() == 4 && FieldCount<kv::TierKeyDelta>() == 2,
              "a field was added to KvEventDelta: encode and decode it in the gather part, then "
              "update the count");

}  // namespace

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
    w.PutBool(r.finished);
    w.Put<uint8_t>(static_cast<uint8_t>(r.finish_reason));
    w.Put<int32_t>(static_cast<int32_t>(r.status.code()));
    w.PutString(r.status.message());
    w.PutBool(r.kv_pull_failed);
    w.PutBool(r.context.has_value());
    if (r.context) PutContextSource(w, *r.context);
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
    uint8_t reason = 0;
    bool has_context = false;
    int32_t code = 0;
    std::string message;
    bool ok = rd.Get(&id) && rd.Get(&r.rank) && rd.Get(&r.step) && rd.GetVector(&r.tokens) &&
              rd.Get(&num_lp);
    for (uint32_t j = 0; ok && j < num_lp; ++j) {
      r.logprobs.emplace_back();
      ok = rd.GetVector(&r.logprobs.back());
    }
    ok = ok && rd.GetBool(&r.finished) && rd.Get(&reason) && rd.Get(&code) &&
         rd.GetString(&message) && rd.GetBool(&r.kv_pull_failed) && rd.GetBool(&has_context) &&
         reason <= static_cast<uint8_t>(sched::FinishReason::kError) && code >= 0 &&
         code <= static_cast<int32_t>(absl::StatusCode::kUnauthenticated);
    if (ok && has_context) ok = GetContextSource(rd, &r.context.emplace());
    ok = ok && rd.Get(&r.num_prompt_tokens) && rd.Get(&r.cached_prompt_tokens) &&
         rd.Get(&r.drafts_proposed) && rd.Get(&r.drafts_accepted);
    if (!ok) return absl::DataLossError("responses: malformed response");
    r.id = RequestId(id);
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
  for (const kv::TierKeyDelta* tier : {&events.host, &events.disk}) {
    w.PutVector(tier->stored);
    w.PutVector(tier->removed);
  }
  return w.Take();
}

absl::Status DecodeGatherPart(const std::string& bytes, std::vector<Response>* responses,
                              kv::KvEventDelta* events) {
  WireReader rd(bytes);
  std::string encoded;
  if (!rd.GetString(&encoded) || !rd.GetVector(&events->committed) ||
      !rd.GetVector(&events->evicted) || !rd.GetVector(&events->host.stored) ||
      !rd.GetVector(&events->host.removed) || !rd.GetVector(&events->disk.stored) ||
      !rd.GetVector(&events->disk.removed) || !rd.done()) {
    return absl::DataLossError("response gather: malformed part");
  }
  absl::StatusOr<std::vector<Response>> decoded = DecodeResponses(encoded);
  if (!decoded.ok()) return decoded.status();
  *responses = *std::move(decoded);
  return absl::OkStatus();
}

}  // namespace lockstep::exec

#include "runtime/executor/intake.h"

#include "runtime/executor/wire.h"

namespace lockstep::exec {
namespace {

// The header's flag bits.
constexpr uint8_t kDrainFlag = 1;
constexpr uint8_t kDrainExpiredFlag = 2;

void PutSampling(WireWriter& w, const sched::SamplingParams& s) {
  w.Put(s.max_tokens);
  w.Put(s.temperature);
  w.Put(s.top_k);
  w.Put(s.top_p);
  w.Put(s.seed);
  w.PutVector(s.stop_token_ids);
  w.Put<uint8_t>(s.ignore_eos);
  w.Put(s.logprobs);
}

bool GetSampling(WireReader& r, sched::SamplingParams* s) {
  uint8_t ignore_eos = 0;
  const bool ok = r.Get(&s->max_tokens) && r.Get(&s->temperature) && r.Get(&s->top_k) &&
                  r.Get(&s->top_p) && r.Get(&s->seed) && r.GetVector(&s->stop_token_ids) &&
                  r.Get(&ignore_eos) && r.Get(&s->logprobs);
  s->ignore_eos = ignore_eos != 0;
  return ok;
}

}  // namespace

std::string IntakeBatch::Encode() const {
  WireWriter w;
  w.Put<uint8_t>((drain ? kDrainFlag : 0) | (drain_expired ? kDrainExpiredFlag : 0));
  w.Put<uint32_t>(static_cast<uint32_t>(cancels.size()));
  for (RequestId id : cancels) w.Put(id.value());
  w.Put<uint32_t>(static_cast<uint32_t>(requests.size()));
  for (const NewRequestSpec& r : requests) {
    w.Put(r.id.value());
    w.Put<uint8_t>(static_cast<uint8_t>(r.type));
    w.PutVector(r.prompt);
    PutSampling(w, r.sampling);
    w.Put<int32_t>(r.pinned_rank.value_or(-1));
    w.Put<int32_t>(r.preferred_rank.value_or(-1));
    w.Put(absl::ToUnixNanos(r.arrival));
    w.Put<uint8_t>(r.context_source.has_value());
    if (r.context_source) {
      const sched::ContextSource& c = *r.context_source;
      w.PutString(c.instance);
      w.Put(c.rank);
      w.PutString(c.address);
      w.Put(c.remote_id.value());
      w.Put(absl::ToUnixNanos(c.lease_expiry));
      w.Put(c.first_token);
      w.PutVector(c.first_drafts);
    }
  }
  return w.Take();
}

absl::StatusOr<IntakeBatch> IntakeBatch::Decode(const std::string& bytes) {
  IntakeBatch b;
  WireReader r(bytes);
  uint8_t flags = 0;
  uint32_t n = 0;
  if (!r.Get(&flags) || !r.Get(&n)) return absl::DataLossError("intake batch: truncated header");
  if ((flags & ~(kDrainFlag | kDrainExpiredFlag)) != 0) {
    return absl::DataLossError("intake batch: unknown flags");
  }
  b.drain = (flags & kDrainFlag) != 0;
  b.drain_expired = (flags & kDrainExpiredFlag) != 0;
  for (uint32_t i = 0; i < n; ++i) {
    int64_t id = 0;
    if (!r.Get(&id)) return absl::DataLossError("intake batch: truncated cancels");
    b.cancels.push_back(RequestId(id));
  }
  if (!r.Get(&n)) return absl::DataLossError("intake batch: truncated request count");
  for (uint32_t i = 0; i < n; ++i) {
    NewRequestSpec s;
    int64_t id = 0, arrival = 0;
    uint8_t type = 0, has_source = 0;
    int32_t pin = -1;
    int32_t hint = -1;
    if (!r.Get(&id) || !r.Get(&type) || !r.GetVector(&s.prompt) || !GetSampling(r, &s.sampling) ||
        !r.Get(&pin) || !r.Get(&hint) || !r.Get(&arrival) || !r.Get(&has_source) || type > 2) {
      return absl::DataLossError("intake batch: malformed request");
    }
    s.id = RequestId(id);
    s.type = static_cast<sched::RequestType>(type);
    if (pin >= 0) s.pinned_rank = pin;
    if (hint >= 0) s.preferred_rank = hint;
    s.arrival = absl::FromUnixNanos(arrival);
    if (has_source) {
      sched::ContextSource c;
      int64_t remote = 0, lease = 0;
      if (!r.GetString(&c.instance) || !r.Get(&c.rank) || !r.GetString(&c.address) ||
          !r.Get(&remote) || !r.Get(&lease) || !r.Get(&c.first_token) ||
          !r.GetVector(&c.first_drafts)) {
        return absl::DataLossError("intake batch: malformed context source");
      }
      c.remote_id = RequestId(remote);
      c.lease_expiry = absl::FromUnixNanos(lease);
      s.context_source = std::move(c);
    }
    b.requests.push_back(std::move(s));
  }
  if (!r.done()) return absl::DataLossError("intake batch: trailing bytes");
  return b;
}

void Inbox::Push(NewRequestSpec spec) {
  absl::MutexLock lock(&mu_);
  pending_.requests.push_back(std::move(spec));
}

void Inbox::Cancel(RequestId id) {
  absl::MutexLock lock(&mu_);
  pending_.cancels.push_back(id);
}

void Inbox::Drain() {
  absl::MutexLock lock(&mu_);
  pending_.drain = true;
}

void Inbox::TakeAll(IntakeBatch* batch) {
  absl::MutexLock lock(&mu_);
  for (NewRequestSpec& s : pending_.requests) batch->requests.push_back(std::move(s));
  batch->cancels.insert(batch->cancels.end(), pending_.cancels.begin(), pending_.cancels.end());
  batch->drain = batch->drain || pending_.drain;
  pending_ = IntakeBatch();
}

bool Inbox::WaitForWork(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto has_work = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !pending_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&has_work), timeout);
}

size_t Inbox::size() const {
  absl::MutexLock lock(&mu_);
  return pending_.requests.size() + pending_.cancels.size() + (pending_.drain ? 1 : 0);
}

}  // namespace lockstep::exec

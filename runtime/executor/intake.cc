#include "runtime/executor/intake.h"

#include "runtime/executor/field_count.h"
#include "runtime/executor/request_spec_codec.h"
#include "runtime/executor/wire.h"

namespace lockstep::exec {
namespace {

// The header's flag bits.
constexpr uint8_t kDrainFlag = 1;
constexpr uint8_t kDrainExpiredFlag = 2;

static_assert(FieldCount<IntakeBatch>() == 4,
              "a field was added to IntakeBatch: encode and decode it below, then update the "
              "count");

}  // namespace

std::string IntakeBatch::Encode() const {
  WireWriter w;
  w.Put<uint8_t>((drain ? kDrainFlag : 0) | (drain_expired ? kDrainExpiredFlag : 0));
  w.Put<uint32_t>(static_cast<uint32_t>(cancels.size()));
  for (RequestId id : cancels) w.Put(id.value());
  w.Put<uint32_t>(static_cast<uint32_t>(requests.size()));
  for (const NewRequestSpec& r : requests) PutRequestSpec(w, r);
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
    if (!GetRequestSpec(r, &s)) return absl::DataLossError("intake batch: malformed request");
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

#include "runtime/transfer/send_claims.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lockstep::transfer {

ActivePull::ActivePull(std::shared_ptr<SendClaims> claims, SendSpec spec,
                       grpc::ServerContext* context)
    : claims_(std::move(claims)), spec_(std::move(spec)), context_(context) {}

ActivePull::~ActivePull() {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (abort_reason_.has_value()) {
      status = *abort_reason_;
    } else if (finished_.has_value()) {
      status = *finished_;
    } else {
      status = absl::InternalError(absl::StrCat("the pull of request ", spec_.blocks.id.value(),
                                                " ended without an outcome"));
    }
  }
  claims_->EndPull(spec_.blocks.id, spec_.blocks.generation, std::move(status));
}

std::optional<absl::Status> ActivePull::aborted() const {
  absl::MutexLock lock(&mu_);
  return abort_reason_;
}

void ActivePull::Finish(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (!finished_.has_value()) finished_ = std::move(status);
}

void ActivePull::DetachContext() {
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
}

void ActivePull::Abort(absl::Status why) {
  absl::MutexLock lock(&mu_);
  if (abort_reason_.has_value()) return;
  abort_reason_ = std::move(why);
  abort_signal_.Notify();
  // Unblocks a Write waiting for flow control; the handler then sees the abort.
  if (context_ != nullptr) context_->TryCancel();
}

SendClaims::SendClaims(Clock* clock, std::shared_ptr<EventQueue> events)
    : clock_(clock), events_(std::move(events)) {}

std::shared_ptr<SendClaims> SendClaims::Create(Clock* clock, std::shared_ptr<EventQueue> events) {
  return std::shared_ptr<SendClaims>(new SendClaims(clock, std::move(events)));
}

absl::Status SendClaims::Add(const SendSpec& spec) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("the KV transfer service is shutting down");
  if (claims_.contains(spec.blocks.id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", spec.blocks.id.value(), " already has a transfer claim"));
  }
  claims_.emplace(spec.blocks.id, Claim{spec, {}, false});
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ActivePull>> SendClaims::BeginPull(RequestId id,
                                                                  grpc::ServerContext* context) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return absl::UnavailableError("the context rank is shutting down");
  auto it = claims_.find(id);
  if (it == claims_.end()) {
    return absl::NotFoundError(absl::StrCat("no transfer claim for request ", id.value(),
                                            " (unknown, already ended, or its lease expired)"));
  }
  Claim& claim = it->second;
  if (claim.pulling) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", id.value(), " is already being pulled"));
  }
  if (clock_->Now() >= claim.spec.lease_expiry) {
    events_->Push({TransferKind::kSend, id, claim.spec.blocks.generation,
                   absl::DeadlineExceededError("transfer claim lease expired")});
    claims_.erase(it);
    return absl::NotFoundError(
        absl::StrCat("the transfer claim of request ", id.value(), " expired"));
  }
  std::shared_ptr<ActivePull> pull(new ActivePull(shared_from_this(), claim.spec, context));
  claim.pull = pull;
  claim.pulling = true;
  return pull;
}

void SendClaims::EndPull(RequestId id, uint64_t generation, absl::Status status) {
  absl::MutexLock lock(&mu_);
  claims_.erase(id);
  events_->Push({TransferKind::kSend, id, generation, std::move(status)});
}

void SendClaims::AbortAll(std::vector<std::shared_ptr<ActivePull>> pulls, const absl::Status& why) {
  for (const std::shared_ptr<ActivePull>& pull : pulls) pull->Abort(why);  // first reason wins
  // `pulls` may hold the last references: they are dropped here, outside mu_.
}

void SendClaims::Cancel(RequestId id) {
  std::vector<std::shared_ptr<ActivePull>> running;
  {
    absl::MutexLock lock(&mu_);
    auto it = claims_.find(id);
    if (it == claims_.end()) return;
    if (!it->second.pulling) {
      events_->Push({TransferKind::kSend, id, it->second.spec.blocks.generation,
                     absl::CancelledError("transfer claim cancelled")});
      claims_.erase(it);
      return;
    }
    // A null lock means the last reference is going: EndPull reports it.
    if (auto pull = it->second.pull.lock()) running.push_back(std::move(pull));
  }
  AbortAll(std::move(running), absl::CancelledError("transfer claim cancelled during its pull"));
}

void SendClaims::ExpireLeases(absl::Time now) {
  std::vector<std::shared_ptr<ActivePull>> running;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = claims_.begin(); it != claims_.end();) {
      Claim& claim = it->second;
      if (now < claim.spec.lease_expiry) {
        ++it;
        continue;
      }
      if (!claim.pulling) {
        events_->Push({TransferKind::kSend, it->first, claim.spec.blocks.generation,
                       absl::DeadlineExceededError("transfer claim lease expired")});
        claims_.erase(it++);
        continue;
      }
      // Moved out at once: dropping a last reference under mu_ would deadlock (EndPull).
      if (auto pull = claim.pull.lock()) running.push_back(std::move(pull));
      ++it;
    }
  }
  AbortAll(std::move(running),
           absl::DeadlineExceededError("transfer claim lease expired during its pull"));
}

void SendClaims::Shutdown() {
  std::vector<std::shared_ptr<ActivePull>> running;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& [id, claim] : claims_) {
      if (auto pull = claim.pull.lock()) running.push_back(std::move(pull));
    }
  }
  AbortAll(std::move(running), absl::UnavailableError("the context rank is shutting down"));
}

size_t SendClaims::size() const {
  absl::MutexLock lock(&mu_);
  return claims_.size();
}

}  // namespace lockstep::transfer

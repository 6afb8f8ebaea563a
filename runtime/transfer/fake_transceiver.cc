#include "runtime/transfer/fake_transceiver.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep::transfer {

FakeTransceiver::FakeTransceiver(const FakeTransceiverOptions& options, Clock* clock)
    : options_(options), clock_(clock), rng_(options.seed) {}

absl::Duration FakeTransceiver::Latency() {
  const int64_t lo = absl::ToInt64Microseconds(options_.min_latency);
  const int64_t hi = std::max(lo, absl::ToInt64Microseconds(options_.max_latency));
  return absl::Microseconds(lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1)));
}

double FakeTransceiver::Uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
}

absl::Status FakeTransceiver::Start(TransferKind kind, RequestId id, uint64_t generation,
                                    absl::Time limit, absl::Status expiry) {
  if (pending_.contains(id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("a transfer of request ", id.value(), " is already in flight"));
  }
  const absl::Time done = clock_->Now() + Latency();
  const double u = Uniform();
  Pending p{kind, generation, done, absl::OkStatus()};
  if (u < options_.failure_rate && options_.transport == FakeTransport::kUcx) {
    InjectUcxFault(id, clock_->Now(), limit, p);
    if (p.status.ok() && p.at > limit) {  // a fallback that ran past the deadline
      p.at = limit;
      p.status = std::move(expiry);
    }
  } else if (u < options_.failure_rate) {
    p.status =
        absl::UnavailableError(absl::StrCat("injected transfer failure of request ", id.value()));
    injected_.push_back({InjectedFault::Kind::kTransferFailure, id});
  } else if (done > limit) {
    p.at = limit;
    p.status = std::move(expiry);
  }
  pending_.emplace(id, std::move(p));
  ++started_;
  return absl::OkStatus();
}

void FakeTransceiver::InjectUcxFault(RequestId id, absl::Time start, absl::Time limit,
                                     Pending& p) {
  const auto fault = static_cast<UcxFault>(1 + rng_() % 4);
  const std::string what = absl::StrCat("injected UCX fault of request ", id.value(), ": ");
  const absl::Duration latency = p.at - start;
  switch (fault) {
    case UcxFault::kPeerGoneMidGet:
      p.at = start + latency * Uniform();
      p.status = absl::UnavailableError(absl::StrCat(
          what, "the UCX get from the context rank failed: the context rank went away mid-get"));
      break;
    case UcxFault::kEndpointError:
      p.at = start;
      p.status = absl::UnavailableError(
          absl::StrCat(what, "UCX endpoint error: Destination is unreachable"));
      break;
    case UcxFault::kRegistrationFailure:  // the offer is refused: the pull goes over TCP
      p.at = start + 2 * latency;
      injected_.push_back({InjectedFault::Kind::kTransferFallback, id, fault});
      return;
    case UcxFault::kGetStuck:
      p.at = limit;
      p.status = absl::DeadlineExceededError(
          absl::StrCat(what, "the UCX get did not complete by its deadline"));
      break;
    case UcxFault::kNone:
      return;
  }
  p.at = std::min(p.at, limit);
  injected_.push_back({InjectedFault::Kind::kTransferFailure, id, fault});
}

absl::Status FakeTransceiver::StartSend(const SendSpec& spec) {
  // The rate draws only when set, so configurations without refusals replay as before.
  const RequestId id = spec.blocks.id;
  if ((options_.refuse_send && options_.refuse_send(id)) ||
      (options_.send_refusal_rate > 0 && Uniform() < options_.send_refusal_rate)) {
    injected_.push_back({InjectedFault::Kind::kSendRefusal, id});
    return absl::UnavailableError(absl::StrCat("injected send refusal of request ", id.value()));
  }
  return Start(TransferKind::kSend, id, spec.blocks.generation, spec.lease_expiry,
               absl::DeadlineExceededError("transfer claim lease expired"));
}

absl::Status FakeTransceiver::StartReceive(const ReceiveSpec& spec) {
  if (options_.tracker != nullptr) {
    for (int pool = 0; pool < 2; ++pool) {
      for (BlockId b : pool == 0 ? spec.blocks.blocks : spec.blocks.draft_blocks) {
        if (auto step = options_.tracker->Holder(pool, b.value())) {
          return absl::InternalError(absl::StrCat("KV receive of request ", spec.blocks.id.value(),
                                                  " into ", pool == 0 ? "target" : "draft",
                                                  " block ", b.value(), " that engine batch ",
                                                  *step, " may still write"));
        }
      }
    }
  }
  return Start(TransferKind::kReceive, spec.blocks.id, spec.blocks.generation, spec.deadline,
               absl::DeadlineExceededError("KV receive deadline exceeded"));
}

std::vector<TransferEvent> FakeTransceiver::Poll() {
  std::vector<TransferEvent> out = std::move(cancelled_);
  cancelled_.clear();
  const absl::Time now = clock_->Now();
  std::vector<std::pair<absl::Time, RequestId>> due;
  for (const auto& [id, p] : pending_) {
    if (p.at <= now) due.emplace_back(p.at, id);
  }
  std::sort(due.begin(), due.end());
  for (const auto& [at, id] : due) {
    auto it = pending_.find(id);
    out.push_back({it->second.kind, id, it->second.generation, it->second.status});
    pending_.erase(it);
  }
  return out;
}

void FakeTransceiver::Cancel(RequestId id) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  cancelled_.push_back(
      {it->second.kind, id, it->second.generation, absl::CancelledError("transfer cancelled")});
  pending_.erase(it);
}

}  // namespace lockstep::transfer

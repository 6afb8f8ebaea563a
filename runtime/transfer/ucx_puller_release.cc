// UcxPuller's Releases (ucx_puller.h): each at once, or deferred to ride on the next
// session call to the same context rank.
#include "runtime/transfer/ucx_puller.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace lockstep::transfer {
namespace {

// How long a Release may take; it only frees the context rank's staged copy early (its
// deadline drops it otherwise), so a slow one does not hold the receive thread long.
constexpr absl::Duration kReleaseTimeout = absl::Seconds(1);
// Deferred Releases one call carries at most (the rest wait for the next).
constexpr size_t kMaxCarried = 64;

}  // namespace

void UcxPuller::Release(lockstep::v1::KvUcxService::StubInterface& stub, const ReceiveSpec& spec,
                        uint64_t offer_id) const {
  ReleaseOffers(stub, spec.source.address, {&offer_id, 1});
}

void UcxPuller::ReleaseOffers(lockstep::v1::KvUcxService::StubInterface& stub,
                              const std::string& address,
                              absl::Span<const uint64_t> offer_ids) const {
  const absl::Time deadline = absl::Now() + kReleaseTimeout;
  lockstep::v1::UcxRelease request;
  request.set_offer_id(offer_ids.front());
  request.set_requester(puller_.requester());
  if (std::optional<Session> session = SessionWith(address); session.has_value()) {
    lockstep::v1::UcxSessionCall call;
    *call.mutable_release() = request;
    if (session->defers) {
      for (const uint64_t offer_id : offer_ids.subspan(1)) call.add_also_release(offer_id);
    }
    absl::StatusOr<lockstep::v1::UcxSessionAnswer> answer =
        CallSession(stub, *session, std::move(call), deadline, nullptr);
    // Answered (released, or already gone: NotFound): done, for every id the call
    // carried.
    if (answer.ok() || absl::IsNotFound(answer.status())) {
      if (session->defers) return;
      offer_ids.remove_prefix(1);
    } else {
      DropSession(address, *session);
      // A lost call leaves the copies to their deadline; a refused key goes over gRPC.
      if (!absl::IsUnauthenticated(answer.status()) && !absl::IsUnimplemented(answer.status())) {
        return;
      }
    }
  }
  for (const uint64_t offer_id : offer_ids) {
    if (absl::Now() >= deadline) return;
    request.set_offer_id(offer_id);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    lockstep::v1::UcxReleaseReply reply;
    (void)stub.Release(&context, request, &reply);
  }
}

bool UcxPuller::DeferRelease(const ReceiveSpec& spec, uint64_t offer_id) const {
  // Only for copies read in place (docs/perf/ucx.md twelfth round: no gain over tcp).
  std::optional<Session> session = SessionWith(spec.source.address);
  if (!session.has_value() || !session->defers || !session->maps) return false;
  Defer(spec.source.address, {&offer_id, 1});
  return true;
}

bool UcxPuller::HasDeferredReleases() const {
  absl::MutexLock lock(&mu_);
  return !deferred_.empty();
}

void UcxPuller::Defer(const std::string& address, absl::Span<const uint64_t> offer_ids) const {
  if (offer_ids.empty()) return;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  std::vector<Deferred>& deferred = deferred_[address];
  for (const uint64_t offer_id : offer_ids) deferred.push_back({offer_id, now});
}

std::vector<uint64_t> UcxPuller::TakeDeferred(const std::string& address) const {
  std::vector<uint64_t> taken;
  absl::MutexLock lock(&mu_);
  auto it = deferred_.find(address);
  if (it == deferred_.end()) return taken;
  std::vector<Deferred>& deferred = it->second;
  std::erase_if(deferred, [&](const Deferred& d) {
    if (taken.size() == kMaxCarried) return false;
    taken.push_back(d.offer_id);
    return true;
  });
  if (deferred.empty()) deferred_.erase(it);
  return taken;
}

void UcxPuller::ReleaseDeferred(
    const std::function<lockstep::v1::KvUcxService::StubInterface&(const std::string&)>& stub_for,
    bool due_only) const {
  absl::flat_hash_map<std::string, std::vector<Deferred>> deferred;
  {
    const absl::Time due = due_only ? absl::Now() - release_linger() : absl::InfiniteFuture();
    absl::MutexLock lock(&mu_);
    for (auto it = deferred_.begin(); it != deferred_.end();) {
      std::vector<Deferred>& waiting = it->second;
      std::erase_if(waiting, [&](const Deferred& d) {
        if (d.since > due) return false;
        deferred[it->first].push_back(d);
        return true;
      });
      if (waiting.empty()) {
        deferred_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [address, offers] : deferred) {
    // kMaxCarried + 1 a call: one released, the rest carried.
    for (size_t begin = 0; begin < offers.size(); begin += kMaxCarried + 1) {
      std::vector<uint64_t> ids;
      for (size_t i = begin; i < std::min(offers.size(), begin + kMaxCarried + 1); ++i) {
        ids.push_back(offers[i].offer_id);
      }
      ReleaseOffers(stub_for(address), address, ids);
    }
  }
}

}  // namespace lockstep::transfer

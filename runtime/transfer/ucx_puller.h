// One KV receive over the UCX data plane (docs/transfer-ucx.md), on a generation rank's
// receive thread: asks the context rank for an offer (KvUcxService.Offer, on its
// token-checked gRPC port), checks every staged block's CRC32C and writes the blocks
// into the receive's blocks through BlockWriter (as the other transports do), then
// releases the offer (a copy read in place: on the next session call to that rank
// where it takes deferred Releases, DeferRelease). Where shared memory maps the staged copy into
// this process (UcxWorker::MapRemote: the context rank on the same host) the blocks are read in
// place, in one pass; otherwise the staged copy is read into a host buffer in pieces of
// whole blocks (UcxWorker::GetInPieces), each piece checked and written while the next
// ones are on the wire.
//
// Sessions: where a context rank's offer carries a session key (UcxOffer.session_key),
// the later Offers and Releases to that rank go as UCX calls to its worker
// (UcxWorker::Call, a UcxSessionCall) instead of gRPC, with the receive's deadline. A
// call that fails (no answer by the deadline, the endpoint's error, a refused key)
// drops the session: the next Offer goes over gRPC again. A refused key or a rank that
// serves no calls costs nothing else (the claim is untouched: the Offer goes over gRPC
// at once); any other failure fails the receive as a failed gRPC Offer does. A call the
// context rank dropped (its key expired or evicted: "no UCX session") is such a refusal.
//
// Published offers: once a context rank's staged copy was read in place (its session's
// `maps`), the next session Offers ask for a published offer
// (UcxSessionCall.reads_published; not with UcxWorkerHooks::no_published): the rank
// answers before staging, and each piece is checked and written once the rank has
// published its blocks (ucx_published.h), waiting at most until the receive's deadline,
// its cancel or a failed liveness check (below); a failure the rank publishes after its
// answer fails the receive with its code and message. A rank that answers an ordinary
// offer (an earlier version) is read as before.
//
// Liveness: a session call, or a read of the staged copy (its get or fetch, or its
// endpoint's handshake), unanswered for 100 ms checks every 250 ms that the context rank
// lives, with a gRPC Release of offer 0 (answered by its gRPC threads, whatever its
// worker is busy with): UNAVAILABLE (a refused connection, where a gRPC Offer would have
// failed too) ends the wait, the context rank gone, long before the deadline, on every
// transport (shared memory detects no dead peer of its own); any answer, or none within
// 250 ms, waits on. A read in place waits for nothing (the mapping outlives the peer).
//
// Thread safety: thread-safe; pulls may run on several threads at once, into disjoint
// blocks.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_UCX_PULLER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_UCX_PULLER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/kv_transfer.grpc.pb.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/kv_puller.h"
#include "runtime/transfer/transceiver.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {

class UcxPuller {
 public:
  // `puller` (for the request), the copiers and `worker` must outlive this.
  UcxPuller(const KvPuller& puller, KvDescriptor descriptor, KvCopiers copiers,
            std::shared_ptr<UcxWorker> worker);

  struct Outcome {
    // The context rank has no UCX data plane or refused the offer; the claim is
    // untouched: pull over another transport.
    bool fall_back = false;
    // Set once an offer was made: the context rank's staged copy, to be let go with
    // Release (UcxPuller::Release) once the receive has been reported (a receive
    // cancelled while its session Offer was unanswered leaves the copy to its
    // deadline). Sending it after the report keeps its round trip off the receive's
    // path without gRPC's callback API (whose alternative completion queue crashed when
    // channels were torn down while a Release was in flight).
    std::optional<uint64_t> release_offer;
  };

  // Pulls `spec` by `spec.deadline` (real time). Outcomes as KvPuller::Pull's: OK;
  // Cancelled after control.Cancel() (no block is written after it returns); DataLoss
  // naming the block whose checksum failed, or a malformed offer; DeadlineExceeded;
  // Unavailable when the context rank is unreachable or its UCX endpoint fails (gone
  // mid-get); the context rank's refusal otherwise — each prefixed with where it came
  // from. With `outcome->fall_back` the status says why and nothing was pulled.
  absl::Status Pull(lockstep::v1::KvUcxService::StubInterface& stub, const ReceiveSpec& spec,
                    PullControl& control, Outcome* outcome) const;

  // Lets the context rank drop the staged copy of `offer_id` (Outcome::release_offer),
  // waiting at most a second for the answer: a lost Release only keeps the copy until
  // its deadline.
  void Release(lockstep::v1::KvUcxService::StubInterface& stub, const ReceiveSpec& spec,
               uint64_t offer_id) const ABSL_LOCKS_EXCLUDED(mu_);

  // Deferred Releases: where the context rank takes them (UcxOffer.takes_deferred_releases)
  // and its copies are read in place (mapped: the same host), the Release of `offer_id`
  // is kept to ride on the next session call to that rank
  // (UcxSessionCall.also_release: one call fewer per pull when pulls follow each other)
  // and true returned; false where it must be released now (Release). What no call
  // carried within release_linger() is sent by ReleaseDeferred.
  bool DeferRelease(const ReceiveSpec& spec, uint64_t offer_id) const ABSL_LOCKS_EXCLUDED(mu_);
  bool HasDeferredReleases() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Duration release_linger() const { return worker_->hooks().release_linger; }
  // Sends the deferred Releases (one call per context rank), each as Release does: all
  // of them, or with `due_only` those deferred at least release_linger() ago; `stub_for`
  // gives the stub of a context rank's address.
  void ReleaseDeferred(
      const std::function<lockstep::v1::KvUcxService::StubInterface&(const std::string&)>& stub_for,
      bool due_only = false) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A context rank's session: where its calls go, and the key they carry.
  struct Session {
    std::string worker_address;
    std::string key;
    bool maps = false;  // a staged copy of this rank was mapped in place
    bool defers = false;  // the rank takes deferred Releases
  };
  // A deferred Release (of an offer made to this rank: puller_.requester()) and since
  // when it waits.
  struct Deferred {
    uint64_t offer_id;
    absl::Time since;
  };
  // Takes at most kMaxCarried of the deferred Releases to the rank at `address`; Defer
  // puts ids back (a call that may not have carried them).
  std::vector<uint64_t> TakeDeferred(const std::string& address) const ABSL_LOCKS_EXCLUDED(mu_);
  void Defer(const std::string& address, absl::Span<const uint64_t> offer_ids) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Releases `offer_ids` (at least one) at the rank at `address`: one session call where
  // a session is up, else (or when the rank refuses its key) a gRPC Release each, all
  // within kReleaseTimeout.
  void ReleaseOffers(lockstep::v1::KvUcxService::StubInterface& stub, const std::string& address,
                     absl::Span<const uint64_t> offer_ids) const ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<Session> SessionWith(const std::string& address) const ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the session with `address` if it is still `session`.
  void DropSession(const std::string& address, const Session& session) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Notes whether the staged copies of the rank at `address` (its worker at
  // `worker_address`) map in place, for its session's later Offers.
  void NoteMaps(const std::string& address, const std::string& worker_address, bool maps) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `call` (its key set here) over `session` by `deadline`: the context rank's
  // answer, or its error as the gRPC call's would be (code and message), or the call's
  // own failure (UcxWorker::Call; Unavailable once a liveness check over `stub` found
  // the context rank gone: ContextRankLiveness in ucx_puller.cc).
  absl::StatusOr<lockstep::v1::UcxSessionAnswer> CallSession(
      lockstep::v1::KvUcxService::StubInterface& stub, const Session& session,
      lockstep::v1::UcxSessionCall call, absl::Time deadline,
      const std::function<bool()>& cancelled) const;

  const KvPuller& puller_;
  const KvDescriptor descriptor_;
  const KvCopiers copiers_;
  const std::shared_ptr<UcxWorker> worker_;
  mutable absl::Mutex mu_;
  // Sessions by the context rank's KV transfer address (ContextHandle::address).
  mutable absl::flat_hash_map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  // Deferred Releases by the context rank's address.
  mutable absl::flat_hash_map<std::string, std::vector<Deferred>> deferred_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_UCX_PULLER_H_

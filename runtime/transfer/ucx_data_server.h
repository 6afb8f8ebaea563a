// The context rank's UCX data plane (docs/transfer-ucx.md): KvUcxService
// (proto/kv_transfer.proto) on the KV transfer service's gRPC port, behind the cluster
// token.
//
// Offer: takes a staging range for the claim's blocks from the UCX-allocated staging
// pool (UcxStagingPool; before the claim is touched: a failure to allocate or register
// a chunk, or staging beyond `max_staged_bytes`, is answered with a refusal and the
// puller pulls over TCP or gRPC), then serves the pull through `handler`
// (KvTransferServer::ServePull, which checks the request, ends the claim and writes the chunks with
// their CRC32Cs) into that buffer, and answers the worker address, the remote key, the CRC32C of
// each block and the trailer. The puller reads the buffer with one-sided gets: no thread of this
// rank runs per transfer (the worker's progress thread serves transports that emulate RMA).
//
// The staged copy lives until the puller's Release, the Offer call's deadline (at most
// `max_offer_lifetime` after it), or Shutdown, whichever comes first; one reaper thread
// drops the expired ones. A Release of offer 0 (no offer has that id) is a puller's
// liveness check, answered OK at once.
//
// Sessions: a gRPC Offer's answer carries the requester's session key (256 random bits,
// made on its first Offer and kept while used). The requester's later Offers and
// Releases may come as UCX calls to this rank's worker (UcxWorker::Call, a
// UcxSessionCall naming the key), served on the worker's progress thread: the key is
// checked (in constant time) before anything else, then the call is served exactly as
// the gRPC one (StageOffer, DropOffer); every error is answered (UcxSessionAnswer),
// naming the problem. A key unused for `session_idle_lifetime` is dropped, and so is
// the one unused longest when a new requester needs a place past `max_sessions`: a call
// with a dropped key is refused UNAUTHENTICATED ("no UCX session" / "expired"), touching
// no claim, and the requester offers over gRPC again for a new key.
//
// Published offers: a session Offer whose caller reads published pieces
// (UcxSessionCall.reads_published; not with UcxWorkerHooks::no_published) is answered
// from inside the call's handler once the claim is taken and its first chunk is about to
// be staged (UcxWorker::CallReply), before the rest is staged on the same progress
// thread: the range then carries the published header of ucx_published.h, where each
// chunk's blocks are published once staged and a failure after the answer is written
// for the reader. Such a range is pinned while it is written: a Release, the reaper or
// Shutdown dropping its offer meanwhile gives it back to the pool only once staging
// ended.
//
// A Release (by gRPC or session call) frees only an offer made to its requester; one of
// another requester's is refused PERMISSION_DENIED and stays staged for its owner. A
// session call may also carry Releases the puller deferred (UcxSessionCall.also_release,
// offered in a gRPC Offer's answer: UcxOffer.takes_deferred_releases): each is dropped
// the same way before the call is served, and one that fails is skipped.
//
// Thread safety: thread-safe. gRPC server threads run Offer and Release, the worker's
// progress thread the session calls; the reaper thread waits with a deadline (the
// earliest expiry).
#ifndef LOCKSTEP_RUNTIME_TRANSFER_UCX_DATA_SERVER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_UCX_DATA_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/kv_transfer.grpc.pb.h"
#include "runtime/transfer/chunk_sink.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/ucx_staging.h"
#include "runtime/transfer/ucx_worker.h"

namespace lockstep::transfer {

struct UcxDataServerOptions {
  // Staged bytes held at once, over all offers; an offer beyond it is refused.
  int64_t max_staged_bytes = int64_t{16} << 30;
  // The staging pool's chunk size (a larger offer gets a chunk of its own).
  int64_t staging_chunk_bytes = int64_t{64} << 20;
  // A staged copy is dropped this long after its offer at the latest.
  absl::Duration max_offer_lifetime = absl::Minutes(2);
  // A session key unused this long is dropped (its requester's next call is refused; it
  // offers over gRPC again, for a new key: one gRPC round trip).
  absl::Duration session_idle_lifetime = absl::Minutes(10);
  // Session keys held at most: past it a new requester's key takes the place of the one
  // unused longest (that requester then offers over gRPC again).
  int max_sessions = 4096;
  // Where sessions' idleness is read (not owned); null: the system clock.
  Clock* clock = nullptr;

  absl::Status Validate() const;
};

class UcxDataServer : public lockstep::v1::KvUcxService::Service {
 public:
  // Serves one pull into `sink` by `deadline` (KvTransferServer::ServePull).
  using Handler = std::function<absl::Status(const lockstep::v1::PullRequest& request,
                                             absl::Time deadline, ChunkSink& sink)>;

  // `descriptor` sizes the staging buffers (the handler checks the request against it).
  static absl::StatusOr<std::unique_ptr<UcxDataServer>> Start(std::shared_ptr<UcxWorker> worker,
                                                              KvDescriptor descriptor,
                                                              Handler handler,
                                                              const UcxDataServerOptions& options);
  ~UcxDataServer() override;  // Shutdown()

  // Drops every staged copy, refuses new offers, joins the reaper. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    int offers = 0;            // staged copies held now
    int64_t staged_bytes = 0;  // their bytes
    int64_t released = 0;      // dropped on the puller's Release
    int64_t expired = 0;       // dropped at their deadline
    int64_t refused = 0;       // offers refused (registration failed, staging full)
    int64_t session_calls = 0;    // Offers and Releases that came as UCX session calls
    int64_t session_refused = 0;  // session calls refused (bad key, unknown or expired session)
    int64_t sessions_expired = 0;  // session keys dropped idle past session_idle_lifetime
    int64_t sessions_evicted = 0;  // session keys dropped for a new requester (max_sessions)
    int64_t release_refused = 0;   // Releases of an offer made to another requester
    int64_t liveness_checks = 0;  // Releases of offer 0 (UcxPuller's liveness checks)
    int64_t published = 0;        // offers answered before their blocks were staged
    int64_t released_deferred = 0;  // of `released`, those a later call carried
  };
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  // Where session calls go (this rank's UCX worker).
  const std::string& worker_address() const { return worker_->address(); }

  grpc::Status Offer(grpc::ServerContext* context, const lockstep::v1::PullRequest* request,
                     lockstep::v1::UcxOffer* reply) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::Status Release(grpc::ServerContext* context, const lockstep::v1::UcxRelease* request,
                       lockstep::v1::UcxReleaseReply* reply) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Staged {
    // Shared with the staging of a published offer while it writes the range.
    std::shared_ptr<UcxStagingPool::Range> range;
    int64_t bytes = 0;
    absl::Time expiry;
    std::string requester;  // whom the offer was made to: only it may Release it
  };
  struct Session {
    std::string key;
    absl::Time last_used;  // on clock_
    uint64_t use = 0;      // recency: a later use has a larger one
  };

  UcxDataServer(std::shared_ptr<UcxWorker> worker, std::unique_ptr<UcxStagingPool> pool,
                KvDescriptor descriptor, Handler handler, const UcxDataServerOptions& options);
  // An Offer, by gRPC or session call alike: stages `request`'s claim by `deadline`
  // (capped at max_offer_lifetime from now) and fills `reply`; a refusal is OK with
  // `reply->refusal()` set. With `answer` set, a published offer: `reply` is filled and
  // `answer()` called once the first chunk is about to be staged, then the rest is
  // staged (a failure from then on is published in the range, and OK returned).
  absl::Status StageOffer(const lockstep::v1::PullRequest& request, absl::Time deadline,
                          lockstep::v1::UcxOffer* reply,
                          const std::function<void()>& answer = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `staged` for `requester` until `expiry`: its offer id, or Unavailable once
  // shut down (its bytes unreserved).
  absl::StatusOr<uint64_t> Keep(std::shared_ptr<UcxStagingPool::Range> range, int64_t bytes,
                                absl::Time expiry, const std::string& requester)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A Release, by gRPC or session call alike: drops the staged copy `offer_id` if it
  // was offered to `requester` (PermissionDenied otherwise; the copy stays).
  absl::Status DropOffer(uint64_t offer_id, const std::string& requester) ABSL_LOCKS_EXCLUDED(mu_);
  // The session key of `requester`, made on first use (or after its key was dropped),
  // its use noted; empty where the key cannot be made or this rank has no sessions
  // (UcxWorkerHooks::no_sessions).
  std::string SessionKeyFor(const std::string& requester) ABSL_LOCKS_EXCLUDED(mu_);
  // The session of `requester` at `now`, null when it has none; one idle past
  // session_idle_lifetime is dropped here (`*expired` set).
  Session* SessionOf(const std::string& requester, absl::Time now, bool* expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Notes a use of `session` at `now`.
  void Touch(Session& session, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A session call (a serialized UcxSessionCall), on the worker's progress thread: its
  // serialized UcxSessionAnswer.
  std::string ServeSessionCall(absl::string_view call, UcxWorker::CallReply& reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The bytes a pull of `request` stages (its descriptor's blocks for num_tokens), and
  // in `*blocks` how many blocks; InvalidArgument for a request this rank cannot size.
  absl::StatusOr<int64_t> StagedBytes(const lockstep::v1::PullRequest& request,
                                      int64_t* blocks) const;
  void ReapLoop() ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<UcxWorker> worker_;
  const std::unique_ptr<UcxStagingPool> pool_;  // outlives every Staged range
  const KvDescriptor descriptor_;
  const Handler handler_;
  const UcxDataServerOptions options_;
  Clock* const clock_;  // options_.clock, or the system clock
  std::thread reaper_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Staged> staged_ ABSL_GUARDED_BY(mu_);
  int64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // staged + being staged
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;        // bumped by each new offer
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // Offer ids, seeded with 256 bits of the kernel's CSPRNG (Start).
  std::mt19937_64 ids_ ABSL_GUARDED_BY(mu_);
  // Sessions by requester (PullRequest.requester), at most options_.max_sessions.
  absl::flat_hash_map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t uses_ ABSL_GUARDED_BY(mu_) = 0;  // session uses so far (Session::use)
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_UCX_DATA_SERVER_H_

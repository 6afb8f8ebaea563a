// One UCX (UCP) context and worker of a rank's KV data plane (docs/transfer-ucx.md), with
// its progress thread. The context side registers staging memory (Register) and hands
// the worker address and the region's packed remote key to the puller through the
// token-checked gRPC control messages; the puller reads the region with one-sided RMA
// gets (Get), or, where a shared-memory transport maps the peer's UCX-allocated region
// into this process, reads it in place (MapRemote). Which UCX transports carry the bytes
// is UCX's choice within UCX_TLS (shm and cma on one host, rc/dc verbs across nodes, tcp
// otherwise). Where UCX has no native get to the peer (tcp), UCP would emulate one with
// small active messages answered by the owner's progress thread; Get then asks the owner
// to send the range instead (Fetch: a tagged rendezvous send into the reader's buffer),
// still with no thread per transfer on the owner.
//
// Every wait has a deadline: a get not completed by its deadline returns
// DeadlineExceeded and its endpoint is closed (the bytes land in a buffer the
// operation keeps alive, never in the caller's memory after Get returns); an endpoint
// error (the peer gone, a bad remote key) fails its gets with Unavailable.
//
// Thread safety: thread-safe. The worker runs in UCS_THREAD_MODE_MULTI; one progress
// thread progresses it and sleeps on its event fd between events; callers on any
// thread submit gets and wait on their own completions. A caller waiting for a fetch
// progresses the worker itself meanwhile (one caller at a time, the progress thread
// standing aside), so that its read completes on its own thread.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_UCX_WORKER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_UCX_WORKER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace lockstep::transfer {

// Test hooks; empty in production.
struct UcxWorkerHooks {
  // Register fails with this status when set (a registration failure).
  std::function<absl::Status()> fail_registration;
  // While true, the progress thread does not progress the worker (a peer whose gets
  // never complete, for transports that need the owner's progress).
  std::function<bool()> hold_progress;
  // Called on the caller's thread before each get is submitted, mapped read begins or
  // call is sent.
  std::function<void()> before_get;
  // When true, MapRemote maps nothing (Unimplemented), so reads go through Get.
  bool no_mapping = false;
  // When true, the data plane on this worker neither gives out nor uses UCX sessions
  // (UcxOffer.session_key): a rank of an earlier version.
  bool no_sessions = false;
  // When true, the data plane on this worker neither asks for nor answers published
  // offers (UcxSessionCall.reads_published): a rank of an earlier version.
  bool no_published = false;
  // When true, the data plane on this worker neither defers Releases nor drops the
  // offers a session call carries (UcxSessionCall.also_release): a rank of an earlier
  // version.
  bool no_deferred_releases = false;
  // How long a finished pull's deferred Release waits for a session call to the same
  // context rank to carry it before it is sent on its own (ReceiveWorkers);
  // InfiniteDuration: only with a later call or at shutdown (tests).
  absl::Duration release_linger = absl::Milliseconds(2);
};

// Whether UCX may load its tcp transport under UCX_TLS = `ucx_tls` (null or empty:
// unset, every transport): the list names tcp or "all", or excludes ("^...") without
// naming tcp. Entries may carry a ":aux"-style suffix.
bool UcxTlsMayUseTcp(const char* ucx_tls);

class UcxWorker;
namespace ucx_internal {
struct CallHandlers;
}  // namespace ucx_internal

// Memory registered with the worker's context for remote reads, unregistered on
// destruction. Made by Register (the memory belongs to the caller and must outlive the
// region) or Allocate (UCX allocates it, in memory its transports can share: a peer on
// the same host maps it and reads it with plain copies; freed with the region).
class UcxRegion {
 public:
  ~UcxRegion();
  UcxRegion(const UcxRegion&) = delete;
  UcxRegion& operator=(const UcxRegion&) = delete;

  uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }
  std::byte* data() const { return const_cast<std::byte*>(static_cast<const std::byte*>(data_)); }
  size_t size() const { return size_; }
  // The packed remote key a peer needs to read the region, with the region's address
  // and length (so a reader refuses ranges outside it), framed like the address.
  const std::string& rkey() const { return rkey_; }

 private:
  friend class UcxWorker;
  UcxRegion(std::shared_ptr<UcxWorker> worker, void* memh, const void* data, size_t size,
            std::string rkey);

  const std::shared_ptr<UcxWorker> worker_;
  void* const memh_;  // ucp_mem_h
  const void* const data_;
  const size_t size_;
  const std::string rkey_;
};

class UcxWorker : public std::enable_shared_from_this<UcxWorker> {
 public:
  // Reads UCX's configuration from the environment (UCX_TLS, UCX_NET_DEVICES, ...).
  // Unavailable naming UCX's error when the context or worker cannot be made.
  static absl::StatusOr<std::shared_ptr<UcxWorker>> Create(std::string name,
                                                           UcxWorkerHooks hooks = {});
  // Stops the progress thread, then completes the connections still being made (to and
  // from this worker), closes every endpoint and destroys the worker, waiting at most
  // 2 s for the peers (UCX 1.13 aborts the process when a worker or its peer is
  // destroyed mid-connect).
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // The worker's address, for peers to connect to (opaque bytes: UCX's address framed
  // with its length, checksum and UCX version, which Get checks before UCX sees it).
  const std::string& address() const { return address_; }

  // Registers `data` for remote reads. Unavailable naming UCX's error.
  absl::StatusOr<std::unique_ptr<UcxRegion>> Register(absl::Span<const std::byte> data);
  // Allocates and registers `size` bytes. Unavailable naming UCX's error.
  absl::StatusOr<std::unique_ptr<UcxRegion>> Allocate(size_t size);

  // Reads `out.size()` bytes at `remote_address` of the region `rkey` of the worker at
  // `peer` into `out`, by `deadline`, giving up early once `cancelled()` holds (checked
  // every `slice`). While the read (or its endpoint's handshake) waits for the peer,
  // `peer_check()` (may be empty) is asked every `slice`, as Call's: its error ends the
  // read, the endpoint closed. Outcomes: OK; DeadlineExceeded; Cancelled; Unavailable
  // when the endpoint fails (peer gone, key refused); `peer_check()`'s error;
  // OutOfRange when the range leaves the
  // region `rkey` opens; InvalidArgument for a malformed `peer` or
  // `rkey` and FailedPrecondition for one made by another UCX version (checked before
  // UCX parses them: UCX aborts the process on bytes it does not expect). After a
  // failure the get may still be landing: `out` must not be read, and `keep_alive`
  // (which owns it) is held until UCX has let go of it.
  absl::Status Get(const std::string& peer, const std::string& rkey, uint64_t remote_address,
                   absl::Span<std::byte> out, std::shared_ptr<const void> keep_alive,
                   absl::Time deadline, const std::function<bool()>& cancelled,
                   const std::function<absl::Status()>& peer_check = nullptr,
                   absl::Duration slice = absl::Milliseconds(20));

  // A read handed to its caller in pieces (GetInPieces): `sizes` cut it, in order, and
  // sum to its length; `done(i, bytes)` gets piece i on the caller's thread once it and
  // every piece before it landed, while later pieces are still on the wire.
  struct Pieces {
    std::vector<size_t> sizes;
    std::function<absl::Status(size_t index, absl::Span<const std::byte> bytes)> done;
    // Pieces asked for and not yet handed over, at most (where the owner sends them).
    int in_flight = 4;
  };
  // Get, streamed: where UCX has no native get (tcp) each piece is a read of its own,
  // `pieces.in_flight` at a time, the next one asked for before a landed one is handed
  // over; with a native get (or shared memory) the whole read lands first. Outcomes as
  // Get's, or the first error `pieces.done` returns, after which no piece is handed over
  // and the pieces still on the wire are waited for (until `deadline`; then they are
  // cancelled and the endpoint closed), so that nothing lands in `out` after this
  // returns, except after Cancelled (as Get's).
  absl::Status GetInPieces(const std::string& peer, const std::string& rkey,
                           uint64_t remote_address, absl::Span<std::byte> out, const Pieces& pieces,
                           std::shared_ptr<const void> keep_alive, absl::Time deadline,
                           const std::function<bool()>& cancelled,
                           const std::function<absl::Status()>& peer_check = nullptr,
                           absl::Duration slice = absl::Milliseconds(20));

  // A peer's region mapped into this process: `data` reads it while `hold` lives (the
  // mapping stays valid even if the peer frees the region or exits: the bytes are then
  // stale, not unmapped).
  struct Mapped {
    const std::byte* data = nullptr;
    std::shared_ptr<const void> hold;
  };
  // Maps `size` bytes at `remote_address` of the region `rkey` of the worker at `peer`,
  // where a shared-memory transport reaches that peer and the region is UCX-allocated
  // (no copy, no progress thread: the caller reads the bytes in place). Unimplemented
  // where it cannot (another host, tcp only, user memory): read with Get. Other errors
  // as Get's (endpoint, malformed or foreign `peer` or `rkey`); OutOfRange when the
  // range does not lie in the region.
  absl::StatusOr<Mapped> MapRemote(const std::string& peer, const std::string& rkey,
                                   uint64_t remote_address, size_t size);

  // Calls: a request and its answer as active messages (ucx_call.cc). A call's answer is
  // what the peer's handler returns for its request; the handler runs on the peer's
  // progress thread (it should be short: the peer's worker is not progressed meanwhile).
  using CallHandler = std::function<std::string(absl::string_view request)>;
  // Serves peers' calls with `handler` from now on (null: none; a call is then answered
  // Unimplemented). Returns once no call runs the previous handler any more.
  void ServeCalls(CallHandler handler) ABSL_LOCKS_EXCLUDED(call_handler_mu_);
  // A call's answer sent before its handler returns (ServeCallsWithReply): the handler
  // calls Answer once the caller may go on, then keeps running on the progress thread
  // (e.g. filling memory the answer names while the caller reads it). Used on the
  // progress thread only, within the handler's run.
  class CallReply {
   public:
    // Sends `answer` now; the handler's return value is then not sent. Later calls do
    // nothing. A failed send leaves the caller to its deadline or its endpoint's error.
    void Answer(std::string answer);
    bool answered() const { return answered_; }

   private:
    friend class UcxWorker;
    explicit CallReply(std::function<void(std::string)> send) : send_(std::move(send)) {}
    std::function<void(std::string)> send_;
    bool answered_ = false;
  };
  // As CallHandler; its return value is the answer unless it called `reply.Answer`.
  using ReplyingCallHandler =
      std::function<std::string(absl::string_view request, CallReply& reply)>;
  // ServeCalls with a handler that may answer before it returns.
  void ServeCallsWithReply(ReplyingCallHandler handler) ABSL_LOCKS_EXCLUDED(call_handler_mu_);
  // Sends `request` to the worker at `peer` and waits for its answer by `deadline`,
  // giving up once `cancelled()` holds (checked every `slice`; may be empty). While no
  // answer has come (or the endpoint's handshake waits), `peer_check()` (may be empty)
  // is asked every `slice`, on this
  // thread and without any lock of the worker held (so it may block briefly): an error
  // ends the call with it, the peer taken as gone (shared memory has no peer failure
  // detection of its own). Outcomes: the answer; DeadlineExceeded (the endpoint is
  // then closed: the peer is taken as stuck or gone); Cancelled; Unavailable when the
  // endpoint fails (peer gone); `peer_check()`'s error (the endpoint closed);
  // Unimplemented when the peer serves no calls; InvalidArgument / FailedPrecondition
  // for a malformed or foreign `peer` (as Get's). An answer that comes after the call
  // ended is dropped.
  absl::StatusOr<std::string> Call(const std::string& peer, absl::string_view request,
                                   absl::Time deadline, const std::function<bool()>& cancelled,
                                   const std::function<absl::Status()>& peer_check = nullptr,
                                   absl::Duration slice = absl::Milliseconds(20))
      ABSL_LOCKS_EXCLUDED(calls_mu_);

  // The hooks this worker was made with.
  const UcxWorkerHooks& hooks() const { return hooks_; }
  // Endpoints to peers now open (tests).
  int endpoints() const ABSL_LOCKS_EXCLUDED(mu_);
  // Reads made by Get through Fetch so far (tests).
  int64_t fetches() const { return fetches_.load(); }

 private:
  friend class UcxRegion;
  friend struct ucx_internal::CallHandlers;
  absl::StatusOr<std::unique_ptr<UcxRegion>> Map(void* data, size_t size, bool allocate);
  struct Endpoint;
  struct Closing;
  struct Operation;
  struct RemoteKey;
  // The bytes inside a frame of `kind` ('A' address, 'K' remote key) made by Frame in
  // ucx_worker.cc; InvalidArgument naming the problem, FailedPrecondition for another
  // UCX version.
  static absl::StatusOr<absl::string_view> Unframe(char kind, absl::string_view framed);
  // `framed`'s remote key unpacked on `endpoint` (cached there).
  absl::StatusOr<std::shared_ptr<RemoteKey>> RemoteKeyFor(Endpoint& endpoint,
                                                          const std::string& framed);
  UcxWorker(std::string name, UcxWorkerHooks hooks);
  void ProgressLoop();
  // Progresses the worker on this thread (its progress thread stopped, or standing aside
  // for a reader: TakeProgress) until `done()` holds or `deadline` passes, sleeping on
  // the event fd between events (at most `max_sleep` at a time); `done()`'s last value.
  bool ProgressUntil(const std::function<bool()>& done, absl::Time deadline,
                     absl::Duration max_sleep = absl::Milliseconds(10));
  // A reader waiting for its read takes over progressing the worker while no other
  // reader does: the progress thread stands aside until GiveProgressBack, so that the
  // read completes on the reader's thread instead of on the progress thread, which would
  // then have to wake the reader (a thread hop per read). False when another reader
  // holds it.
  bool TakeProgress() ABSL_LOCKS_EXCLUDED(progress_mu_);
  void GiveProgressBack() ABSL_LOCKS_EXCLUDED(progress_mu_);
  // Before the worker is destroyed: completes every endpoint's connection (a worker
  // flush), closes every endpoint and waits for the closes begun earlier, each until
  // `deadline` at the latest.
  void Quiesce(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // The endpoint to `peer`, created on first use.
  absl::StatusOr<std::shared_ptr<Endpoint>> EndpointTo(const std::string& peer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Drops `endpoint` from the cache and closes it (forcibly), waiting until `deadline`.
  void CloseEndpoint(const std::shared_ptr<Endpoint>& endpoint, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `endpoint`'s handshake has ended (Connected), by `deadline`, giving up
  // once `cancelled()` holds or `peer_check()` (may be empty) fails (each asked every
  // `slice`; the check without mu_ held). A get is submitted only then: an endpoint
  // closed while connecting is closed once connected (the peer's wire-up reply must not
  // outlive this worker), and no get may still be riding on it then.
  absl::Status AwaitConnected(const Endpoint& endpoint, absl::Time deadline,
                              const std::function<bool()>& cancelled,
                              const std::function<absl::Status()>& peer_check, absl::Duration slice)
      ABSL_LOCKS_EXCLUDED(mu_);
  // EndpointTo(peer), once AwaitConnected: the endpoint a get or a call may ride on. One
  // whose handshake was not waited out stays cached, still connecting: the next use
  // waits on it again (no second endpoint to the peer mid-connect).
  absl::StatusOr<std::shared_ptr<Endpoint>> ConnectedEndpointTo(
      const std::string& peer, absl::Time deadline, const std::function<bool()>& cancelled,
      const std::function<absl::Status()>& peer_check, absl::Duration slice)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Closes `endpoint` forcibly now; the progress thread (or Quiesce) completes it.
  void ForceClose(const std::shared_ptr<Endpoint>& endpoint);
  // Makes the closes put off until their handshakes ended (Connected).
  void CloseDeferred() ABSL_LOCKS_EXCLUDED(mu_);
  static void OnEndpointError(void* arg, void* ep, int status);
  // The handshake of the endpoint with `token` is over (its pong came, or it failed).
  void Connected(uint64_t token) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string name_;
  const UcxWorkerHooks hooks_;
  void* context_ = nullptr;  // ucp_context_h
  void* worker_ = nullptr;   // ucp_worker_h
  int event_fd_ = -1;
  std::string address_;
  std::atomic<bool> stopping_{false};
  // Endpoint closes UCX has not completed yet (CloseEndpoint).
  std::atomic<int> closing_{0};
  // UCX refused peer failure detection (shared memory only): connect without it.
  std::atomic<bool> peer_mode_refused_{false};
  std::thread progress_thread_;
  absl::Mutex progress_mu_;
  // A reader progresses the worker (TakeProgress); the progress thread waits meanwhile.
  bool reader_progressing_ ABSL_GUARDED_BY(progress_mu_) = false;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Endpoint>> endpoints_ ABSL_GUARDED_BY(mu_);
  // Endpoints whose connect handshake is unanswered, by token. UCX 1.13 aborts the
  // process when an endpoint fails while its wire-up reply is still queued, which is
  // what a peer meets when this worker stops before that reply went out; so each new
  // endpoint sends a ping that the peer answers behind its reply, and a stopping worker
  // waits for the answers (Quiesce).
  absl::flat_hash_map<uint64_t, std::shared_ptr<Endpoint>> connecting_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_token_{1};
  std::vector<std::shared_ptr<Endpoint>> deferred_closes_ ABSL_GUARDED_BY(mu_);

  // Regions a peer may ask this worker to send (Fetch), by base address: their length
  // and framed remote key (a fetch must name the key, as a get must hold it).
  struct Served {
    uint64_t length = 0;
    std::string rkey;
  };
  absl::Mutex served_mu_;
  std::map<uint64_t, Served> served_ ABSL_GUARDED_BY(served_mu_);
  std::atomic<uint64_t> next_tag_{1};
  std::atomic<int64_t> fetches_{0};
  // Get's path where UCX has no native get to `endpoint` (Endpoint::native_get): a
  // receive is posted for a fresh tag and the peer is asked (an active message) to send
  // the range with that tag, which UCX moves by rendezvous from the peer's region into
  // `out` (on tcp: large writes there, reads into UCX's segment here and a copy out of
  // it, instead of an emulated get's 8 KiB replies). Outcomes as Get's; OutOfRange when the peer
  // serves no such range under `rkey` (it answers with no bytes). With several `pieces`, each is a
  // fetch of its own (GetInPieces).
  absl::Status Fetch(const std::shared_ptr<Endpoint>& endpoint, const std::string& rkey,
                     uint64_t remote_address, absl::Span<std::byte> out, const Pieces& pieces,
                     std::shared_ptr<const void> keep_alive, absl::Time deadline,
                     const std::function<bool()>& cancelled,
                     const std::function<absl::Status()>& peer_check, absl::Duration slice);
  // Waits on this thread until `op` is done or `until`: progresses the worker here where
  // no other reader does (TakeProgress), so that the completion lands on this thread
  // without the progress thread's wake-up; otherwise waits for the other reader's.
  void ProgressFor(Operation& op, absl::Time until);
  // A call's request, on the progress thread: answers it on `reply_ep` (a ucp_ep_h) with
  // the call handler's answer, or as unserved.
  void AnswerCall(void* reply_ep, const void* header, size_t header_length, const void* data,
                  size_t length) ABSL_LOCKS_EXCLUDED(call_handler_mu_);
  // A call's answer, where it lands: completes the call it names, if it still waits.
  void CompleteCall(const void* header, size_t header_length, const void* data, size_t length)
      ABSL_LOCKS_EXCLUDED(calls_mu_);
  struct PendingCall;
  // Held shared while a handler runs; ServeCalls takes it exclusively.
  absl::Mutex call_handler_mu_;
  ReplyingCallHandler call_handler_ ABSL_GUARDED_BY(call_handler_mu_);
  absl::Mutex calls_mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<PendingCall>> calls_ ABSL_GUARDED_BY(calls_mu_);
  std::atomic<uint64_t> next_call_{1};

  // A fetch's answer, on the progress thread: sends the range it names on `reply_ep`
  // (a ucp_ep_h) if this worker serves it under the key it names, else no bytes.
  void AnswerFetch(void* reply_ep, const void* header, size_t header_length)
      ABSL_LOCKS_EXCLUDED(served_mu_);
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_UCX_WORKER_H_

// Internals of UcxWorker shared by its source files (ucx_worker.cc, ucx_endpoint.cc,
// ucx_fetch.cc, ucx_call.cc, ucx_frame.cc): the state of endpoints, remote keys and reads
// in flight. Not for other users.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_UCX_WORKER_INTERNAL_H_
#define LOCKSTEP_RUNTIME_TRANSFER_UCX_WORKER_INTERNAL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/transfer/ucx_worker.h"
#include "ucp/api/ucp.h"

namespace lockstep::transfer {
namespace ucx_internal {

inline absl::Status UcxError(absl::string_view what, ucs_status_t status) {
  return absl::UnavailableError(absl::StrCat(what, ": ", ucs_status_string(status)));
}

inline ucp_context_h Context(void* p) { return static_cast<ucp_context_h>(p); }
inline ucp_worker_h Worker(void* p) { return static_cast<ucp_worker_h>(p); }

// `bytes` (a worker address, 'A', or a packed remote key, 'K') framed as they travel to
// peers (ucx_frame.cc); UcxWorker::Unframe checks and opens the frame.
std::string Frame(char kind, absl::string_view bytes);

// The connect handshake's active messages (UcxWorker::Connected, ucx_endpoint.cc): a
// ping carries the connecting endpoint's 8-byte token and asks for a reply endpoint; the
// peer answers with a pong carrying the same token.
constexpr unsigned kPingId = 1;
constexpr unsigned kPongId = 2;

// A remote key's bytes start with its region's address and length (UcxWorker::Map
// writes them, RemoteKeyFor reads them).
constexpr size_t kRegionPrefix = 16;

// A read served by its owner sending the bytes (UcxWorker::Fetch): an active message
// whose header is the tag to send with, the address and the length (8 bytes each,
// little-endian), then the region's framed remote key.
constexpr unsigned kFetchId = 3;
constexpr size_t kFetchHeader = 24;

// A call (UcxWorker::Call): an active message whose header is the call's id (8 bytes,
// little-endian) and whose data is the request; the answer's header is the same id and
// one byte (1: answered by the handler, 0: no handler), its data the answer. Both are
// sent eagerly, so that the data is there when the handler runs.
constexpr unsigned kCallId = 4;
constexpr unsigned kAnswerId = 5;
constexpr size_t kCallHeader = 8;
constexpr size_t kAnswerHeader = kCallHeader + 1;

// The active message handlers of calls and answers (`arg`: the UcxWorker): they pass
// the message to UcxWorker::AnswerCall / CompleteCall. Calls and answers are sent
// eagerly, so their data is here (a rendezvous one would not be; it is taken as empty).
struct CallHandlers {
  static ucs_status_t OnCall(void* arg, const void* header, size_t header_length, void* data,
                             size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnAnswer(void* arg, const void* header, size_t header_length, void* data,
                               size_t length, const ucp_am_recv_param_t* param);
};

// Whether UCX gives `ep` a native RMA lane (see Endpoint::native_get), read from UCX's
// description of the endpoint's lanes; true when that cannot be read.
bool HasNativeGet(ucp_ep_h ep);

// Waits with `mu` held (on entry and on return) until `done` is set, in slices of
// `slice`: OK once it is; first in each slice, the error `failed` returns when it is not
// OK (may be empty); DeadlineExceeded at `deadline`; Cancelled once `cancelled` says so
// (may be empty). `what` and `bytes` name the read in the errors ("UCX get"). With
// `progress` set, each slice calls it (without `mu`) to progress the worker on this
// thread until the given time or until `done`, instead of waiting for the progress
// thread's completion callback to wake this one. With `unlocked_check` set, each slice
// that ends without `done` calls it without `mu` (it may block briefly) and returns its
// error.
absl::Status AwaitDone(absl::Mutex& mu, const bool& done, absl::string_view what, size_t bytes,
                       absl::Time deadline, absl::Duration slice,
                       const std::function<bool()>& cancelled,
                       const std::function<absl::Status()>& failed,
                       const std::function<void(absl::Time)>& progress = nullptr,
                       const std::function<absl::Status()>& unlocked_check = nullptr)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

}  // namespace ucx_internal

// A connection to one peer worker. `failed` is set by UCX's error callback (on the
// progress thread); a failed endpoint is replaced on the next use.
struct UcxWorker::Endpoint {
  ucp_ep_h ep = nullptr;
  std::string peer;
  UcxWorker* worker = nullptr;
  uint64_t token = 0;  // its connect handshake's (UcxWorker::Connected)
  // Closed while connecting: closed once the handshake ends (guarded by the worker's mu_).
  bool close_when_connected = false;
  std::atomic<bool> failed{false};
  std::atomic<int> error{UCS_OK};
  // UCX reads this peer's memory with a native get (a lane of its own for RMA, as on
  // verbs); without one UCX emulates gets with active messages answered piecewise by the
  // peer's progress thread (tcp), and reads go through Fetch instead.
  bool native_get = true;
  absl::Mutex mu;
  // Unpacked remote keys by their framed bytes, at most kMaxCachedRkeys.
  absl::flat_hash_map<std::string, std::shared_ptr<RemoteKey>> rkeys ABSL_GUARDED_BY(mu);
};

// A remote key unpacked on one endpoint; destroyed when the last get using it is done.
struct UcxWorker::RemoteKey {
  ~RemoteKey() { ucp_rkey_destroy(static_cast<ucp_rkey_h>(rkey)); }
  void* rkey = nullptr;  // ucp_rkey_h
  // The region it opens, as its owner framed it: reads outside it are refused here
  // (UCX does not check them on every transport; a mapped read would fault).
  uint64_t base = 0;
  uint64_t length = 0;

  // OK when `size` bytes at `address` lie in the region; OutOfRange naming both.
  absl::Status Covers(uint64_t address, size_t size) const {
    if (address >= base && address - base <= length && size <= length - (address - base)) {
      return absl::OkStatus();
    }
    return absl::OutOfRangeError(absl::StrCat(
        "the UCX read of ", size, " bytes at offset ", static_cast<int64_t>(address - base),
        " lies outside the context rank's region of ", length, " bytes"));
  }
};

// One get or fetch in flight: completed by UCX's callback on the progress thread.
struct UcxWorker::Operation {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  ucs_status_t status ABSL_GUARDED_BY(mu) = UCS_OK;
  size_t received ABSL_GUARDED_BY(mu) = 0;  // bytes a fetch received
  std::shared_ptr<RemoteKey> rkey;
  std::shared_ptr<const void> keep_alive;  // the destination, until UCX lets go
};

// A call waiting for its answer (UcxWorker::Call); completed where the answer lands.
struct UcxWorker::PendingCall {
  Operation op;                                // `done` once answered
  bool served ABSL_GUARDED_BY(op.mu) = false;  // the peer has a call handler
  std::string answer ABSL_GUARDED_BY(op.mu);
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_UCX_WORKER_INTERNAL_H_

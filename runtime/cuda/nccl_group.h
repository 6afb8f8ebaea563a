// NcclGroup: one rank's NCCL communicator, as the CollectivePrimitives that
// comm::NcclCommunicator runs its protocol on (runtime/comm/nccl_communicator.h).
//
//   NcclGroupOptions options;
//   options.name = "gen0/exec";                  // NCCL's commName
//   options.rank = rank; options.world_size = 4;
//   options.local_rank = local_rank;             // its device: cudaSetDevice(local_rank)
//   options.rendezvous = client;                 // the instance's rendezvous
//   options.uid_key = absl::StrCat(epoch, "/nccl/exec/uid");
//   ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> comm, CreateNcclCommunicator(options));
//
// Bootstrap (docs/gpu.md, "NCCL"): rank 0 makes the ncclUniqueId and publishes it under
// uid_key (the key carries the instance's epoch, so a relaunch never reads a stale
// id); the others wait for it. Every rank selects its device from its local rank,
// creates the communicator non-blocking (ncclCommInitRankConfig, blocking = 0) and
// polls ncclCommGetAsyncError until it is ready or the bootstrap deadline passes; then
// ncclCommAbort and DeadlineExceeded. NCCL_RUNTIME_CONNECT defaults to 0 here, so
// connections are made at init (before the KV cache is sized), not in the first step.
//
// Resources, all made at start: one ncclComm_t; its own cudaStreamNonBlocking stream
// (never the legacy default stream); one event; a device buffer and pinned host
// staging of 2 * buffer_bytes each (send half, receive half). No implicitly
// synchronizing CUDA call (cudaMalloc, cudaFree, synchronous copies, device
// synchronize) runs after Create on this path: an operation copies into the staging,
// enqueues the copies and the NCCL call on the stream, records the event and waits
// for it. An operation whose bytes do not fit buffer_bytes is ResourceExhausted
// (max_transfer_bytes); NcclCommunicator checks every rank's sizes against it after its
// header round, so when one rank's exchange is too large every rank refuses it
// together, before any payload moves, rather than its peers waiting in the exchange.
//
// Wait(deadline): polls the event together with ncclCommGetAsyncError, spinning for
// `spin`, then yielding, then (past 50 ms) sleeping with a doubling back-off up to 1 ms
// (poll.h: a collective of a few milliseconds is never overslept). Async errors:
// ncclRemoteError and ncclSystemError are Unavailable, ncclInvalidUsage and
// ncclInvalidArgument InvalidArgument, the rest Internal, each with ncclGetLastError's
// text. A wait past the deadline is DeadlineExceeded; the owner then calls Abort
// (ncclCommAbort), after which the buffers are never touched or freed again (aborted
// work may still reference them; the worker exits and the instance restarts).
//
// Only NCCL API older than 2.28 is used (no ncclAlltoAll, no ncclGather).
//
// Two communicators on one GPU (the executor's vote group and the engine's
// expert-parallel group run on two threads and may overlap): each has its own
// NcclGroup, hence its own non-blocking stream, and neither makes an implicitly
// synchronizing call after start, so neither can block on the other's kernels.
//
// Thread safety: one thread at a time (the owning communicator's).
#ifndef LOCKSTEP_RUNTIME_CUDA_NCCL_GROUP_H_
#define LOCKSTEP_RUNTIME_CUDA_NCCL_GROUP_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_primitives.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm {
class RendezvousClient;
}  // namespace lockstep::comm

namespace lockstep::cuda {

struct NcclGroupOptions {
  // NCCL's commName and the name in errors: "<instance>/<group>".
  std::string name;
  int rank = 0;
  int world_size = 1;
  // This rank's index among the ranks of its node: its device.
  int local_rank = 0;
  // Where rank 0 publishes the ncclUniqueId and the others read it. Not owned; used
  // only during Create. May be null only for rank 0 (which then keeps the id to
  // itself: world size 1, or a test of a group whose peers never come).
  comm::RendezvousClient* rendezvous = nullptr;
  // "<epoch>/nccl/<group>/uid".
  std::string uid_key;
  // Bound on the whole bootstrap (the id exchange and the communicator's init).
  absl::Duration bootstrap_timeout = absl::Seconds(60);
  // Bytes of each half of the device buffer and of the pinned staging.
  size_t buffer_bytes = size_t{8} << 20;
  // How long Wait polls without sleeping.
  absl::Duration spin = absl::Microseconds(50);
};

class NcclGroup final : public comm::CollectivePrimitives {
 public:
  static absl::StatusOr<std::unique_ptr<NcclGroup>> Create(const NcclGroupOptions& options);

  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  // ncclCommDestroy and frees the buffers; after an Abort, frees nothing.
  ~NcclGroup() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  const std::string& name() const override { return options_.name; }
  size_t max_transfer_bytes() const override { return options_.buffer_bytes; }
  cudaStream_t stream() const { return stream_; }

  absl::Status AllGatherFixed(absl::string_view in, char* out, absl::Time deadline) override;
  absl::Status Broadcast(char* data, size_t size, int root, absl::Time deadline) override;
  absl::Status GroupedSendRecv(absl::Span<const PeerTransfer> transfers,
                               absl::Time deadline) override;
  void Abort() override;

  // Waits until the group's last recorded operation is done (see the file comment).
  absl::Status Wait(absl::Time deadline);
  // Waits until everything enqueued on stream() so far is done (anyone's work: the
  // engine runs its forward on this stream), polling the async error as Wait does.
  absl::Status Sync(absl::Time deadline);

  // The engine's MoE dispatch and combine on device memory, stream-ordered: enqueues
  // one grouped exchange on stream() that sends send_counts[r] elements of `type` from
  // `send` (blocks back to back, rank order) to each rank r and receives
  // recv_counts[r] from each into `recv`, and returns without waiting (Wait, or an
  // event on stream(), orders later work). The counts must already agree pairwise
  // (exchange them first, e.g. with the communicator's AllToAll): NCCL cannot check.
  // Blocks to and from this rank itself are sent too (NCCL copies them).
  absl::Status DeviceAllToAllV(const void* send, absl::Span<const int64_t> send_counts, void* recv,
                               absl::Span<const int64_t> recv_counts, ncclDataType_t type,
                               absl::Time deadline);

 private:
  explicit NcclGroup(const NcclGroupOptions& options) : options_(options) {}
  absl::Status Start(absl::Time deadline);
  // The communicator's async state as a Status (OK while fine or in progress).
  absl::Status AsyncError(absl::string_view what);
  // After an NCCL call: ncclInProgress is polled to completion (non-blocking
  // communicator), anything else but success is an error.
  absl::Status Settle(ncclResult_t result, absl::string_view what, absl::Time deadline);
  absl::Status Fits(size_t send, size_t recv, absl::string_view what) const;

  const NcclGroupOptions options_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  char* device_ = nullptr;  // 2 * buffer_bytes: send half, then receive half
  char* pinned_ = nullptr;  // the same layout on the host
  bool aborted_ = false;
};

// "2.21.5", from ncclGetVersion.
std::string NcclVersionString();

// The communicator's asynchronous state (ncclInProgress while a non-blocking call
// runs), or the error of asking for it: `get` (ncclCommGetAsyncError) may fail without
// writing the state, which must then not read as success.
using NcclGetAsyncError = ncclResult_t (*)(ncclComm_t, ncclResult_t*);
ncclResult_t NcclAsyncState(ncclComm_t comm, NcclGetAsyncError get = ncclCommGetAsyncError);

// A NcclGroup wrapped in comm::NcclCommunicator.
absl::StatusOr<std::unique_ptr<comm::Communicator>> CreateNcclCommunicator(
    const NcclGroupOptions& options);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_NCCL_GROUP_H_

// CollectivePrimitives: the few fixed-size operations a device collective library
// offers (NCCL before 2.28: all-gather, broadcast, grouped send/recv), which
// NcclCommunicator turns into the whole Communicator contract. Implemented by
// cuda::NcclGroup (runtime/cuda/nccl_group.h, one ncclComm_t) and, for CPU tests, by
// testing::FakePrimitives (threads of one process).
//
// Every operation is collective over the group and needs the SAME sizes on every rank
// (a real library hangs or corrupts memory otherwise, it does not fail): callers agree
// on sizes first (collective_wire.h). Every operation waits until `deadline` at most.
// Errors: DeadlineExceeded (not complete by the deadline; in-flight work may still
// touch the buffers: call Abort before reusing them), Unavailable (a peer or the
// network failed: remote or system errors), Internal or InvalidArgument (misuse).
//
// Thread safety: one thread at a time (the owning communicator's).
#ifndef LOCKSTEP_RUNTIME_COMM_COLLECTIVE_PRIMITIVES_H_
#define LOCKSTEP_RUNTIME_COMM_COLLECTIVE_PRIMITIVES_H_

#include <cstddef>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace lockstep::comm {

class CollectivePrimitives {
 public:
  virtual ~CollectivePrimitives() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The group's name, for error messages ("gen0/exec").
  virtual const std::string& name() const = 0;
  // The most bytes one operation may send, and receive, on any rank (the group's
  // buffers; the same on every rank); an operation over it is ResourceExhausted.
  // Callers whose ranks move different sizes check every rank's against it after
  // agreeing sizes, so that all refuse together before any payload moves.
  virtual size_t max_transfer_bytes() const { return std::numeric_limits<size_t>::max(); }

  // `out` (world_size * in.size() bytes) receives rank r's `in` at r * in.size().
  // in.size() is the same on every rank.
  virtual absl::Status AllGatherFixed(absl::string_view in, char* out, absl::Time deadline) = 0;

  // Root's `size` bytes at `data` replace `data` on every other rank; `size` is the
  // same on every rank.
  virtual absl::Status Broadcast(char* data, size_t size, int root, absl::Time deadline) = 0;

  // One peer's side of a grouped exchange: send `send` to `peer` (if not empty) and
  // receive `recv_bytes` from it into `recv` (if not zero). The peer's transfer to
  // this rank must say the same sizes the other way round.
  struct PeerTransfer {
    int peer = 0;
    absl::string_view send;
    char* recv = nullptr;
    size_t recv_bytes = 0;
  };
  // Runs every transfer as one group (ncclGroupStart/End): no ordering among them.
  // Never lists this rank itself.
  virtual absl::Status GroupedSendRecv(absl::Span<const PeerTransfer> transfers,
                                       absl::Time deadline) = 0;

  // Abandons the group and any work in flight (ncclCommAbort); every later operation
  // fails. NcclCommunicator calls it once, after the first failed operation.
  virtual void Abort() = 0;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COLLECTIVE_PRIMITIVES_H_

// One KV receive on a generation rank: a Pull from the context rank named by the
// request's ContextHandle, whose chunks are checked and written into the blocks the
// generation rank allocated, at the same indexes of its block tables, through the
// pools' copiers (BlockWriter; the blocks may be device memory).
//
// Each chunk's payload is checked in host memory (gRPC: in its receive buffers, gathered
// when it spans several; the TCP data plane: read into a staging buffer), and each block
// against its CRC32C before its last bytes are written; a block larger than a chunk has
// its earlier parts written as they come. A failed receive therefore leaves its blocks
// with unspecified contents: they must not be used (the executor fails the request and
// releases them).
//
// Thread safety: KvPuller is immutable and may run pulls on several threads at once,
// into disjoint blocks. PullControl is thread-safe.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_KV_PULLER_H_
#define LOCKSTEP_RUNTIME_TRANSFER_KV_PULLER_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "runtime/transfer/kv_descriptor.h"
#include "runtime/transfer/raw_pull.h"
#include "runtime/transfer/tcp_wire.h"
#include "runtime/transfer/transceiver.h"
#include "runtime/transfer/transfer_hooks.h"

namespace lockstep::transfer {

// A pull's failure, prefixed with the request and where it came from.
absl::Status PullError(absl::StatusCode code, const ContextHandle& source,
                       absl::string_view message);

// The outcome of a receive cancelled on this side.
absl::Status ReceiveCancelledError(RequestId id);

// Cancels one running pull from another thread.
class PullControl {
 public:
  // The receiving thread, around the call. Attaching after Cancel cancels at once.
  void Attach(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);
  void Detach() ABSL_LOCKS_EXCLUDED(mu_);

  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class KvPuller {
 public:
  // `requester` names this rank in the context rank's messages; the copiers must
  // outlive the puller.
  KvPuller(KvDescriptor descriptor, KvCopiers copiers, std::string requester,
           TransferHooks hooks);

  // Pulls `spec.source`'s KV into `spec.blocks` (checked with CheckBlockRefs) until the
  // stream ends or `spec.deadline`, here in real time. Blocks the calling thread. The
  // outcome:
  //   OK; Cancelled after control.Cancel() (no block is written after it returns);
  //   DataLoss naming the block whose checksum failed, or a malformed stream;
  //   DeadlineExceeded; Unavailable when the context rank is unreachable, dies, or
  //   ends the stream; the context rank's refusal otherwise (NotFound: no claim,
  //   FailedPrecondition: descriptors differ, ...), prefixed with where it came from.
  absl::Status Pull(RawPullStub& stub, const ReceiveSpec& spec, PullControl& control) const;

  // What a pull over the TCP data plane left of its connection.
  struct TcpOutcome {
    bool answered = false;  // a frame arrived (the context rank saw the request)
    bool reusable = false;  // the pull ended with its status frame: the next may follow
  };

  // The same pull over a connection to the context rank's data plane (tcp_wire.h):
  // each chunk's payload is read into a staging buffer, checked, then copied in. Same
  // outcomes as Pull; cancel and the deadline are noticed within a poll slice.
  absl::Status PullTcp(const TcpSocket& socket, const ReceiveSpec& spec, PullControl& control,
                       TcpOutcome* outcome) const;

  // What this rank asks the context rank for (also the UCX data plane's offer request,
  // ucx_puller.h).
  lockstep::v1::PullRequest Request(const ReceiveSpec& spec) const;
  // How this rank is named in those requests (PullRequest.requester).
  const std::string& requester() const { return requester_; }

 private:

  const KvDescriptor descriptor_;
  const KvCopiers copiers_;
  const std::string requester_;
  const TransferHooks hooks_;
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_KV_PULLER_H_

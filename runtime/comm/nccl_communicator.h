// NcclCommunicator: the Communicator of one rank over CollectivePrimitives — NCCL's
// fixed-count operations (cuda::NcclGroup, runtime/cuda/nccl_group.h) on GPU nodes,
// fake primitives in CPU tests. NCCL hangs or corrupts memory on mismatched counts
// instead of failing, so every call first all-gathers the fixed-size header of
// collective_wire.h (fingerprint, op, tag, arguments, sizes or per-peer counts) and
// checks it before any payload moves:
//  * AllReduce (int64 sum/min/max; the vote): the values travel in the header (up to
//    kWireInlineBytes per rank; larger ones in one more fixed all-gather) and every rank
//    reduces them on the host in rank order: deterministic, and a desync is seen in
//    the same round. Barrier: the header round alone.
//  * AllGather, AllGatherBytes, Broadcast, Gather: data up to kWireInlineBytes per
//    rank travels in the header (one round); larger data is a fixed all-gather padded
//    to the largest rank, a broadcast of the root's agreed size, or grouped sends to
//    the root.
//  * AllToAll, AllToAllV, AllToAllBytes: grouped send/recv with exact per-peer sizes
//    after the header; AllToAllV's counts are checked pairwise (what s sends to r is
//    what r expects from s). Where ranks move different sizes (AllToAllV,
//    AllToAllBytes, Gather), every rank then checks every rank's payload against the
//    primitives' max_transfer_bytes, so all refuse a call too large for one rank
//    together (ResourceExhausted naming it) before any payload moves.
//
// Protocol: collective_protocol.h; unlike gloo, calls of different ops meet in the
// header round too, so they report a desync. A primitive that does not complete by the
// call's deadline is DeadlineExceeded and a failed peer or network Unavailable (the
// primitives' errors, naming the call). On its first error the communicator also
// aborts the primitives once if a primitive failed (in-flight work may still touch
// its buffers).
//
// Thread safety: one thread at a time (like every Communicator).
#ifndef LOCKSTEP_RUNTIME_COMM_NCCL_COMMUNICATOR_H_
#define LOCKSTEP_RUNTIME_COMM_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/collective_primitives.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm {

namespace internal {
class NcclCall;
}  // namespace internal

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::unique_ptr<CollectivePrimitives> primitives);
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  CollectivePrimitives& primitives() { return *primitives_; }

  absl::Status AllReduce(absl::Span<int64_t> data, ReduceOp op,
                         const CallOptions& options) override;
  absl::Status AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                         const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> AllGatherBytes(absl::string_view data,
                                                          const CallOptions& options) override;
  absl::Status Broadcast(std::string* data, int root, const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> Gather(absl::string_view data, int root,
                                                  const CallOptions& options) override;
  absl::Status AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                        const CallOptions& options) override;
  absl::Status AllToAllV(absl::Span<const float> send, absl::Span<const int64_t> send_counts,
                         absl::Span<float> recv, absl::Span<const int64_t> recv_counts,
                         const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> AllToAllBytes(const std::vector<std::string>& send,
                                                         const CallOptions& options) override;
  absl::Status Barrier(const CallOptions& options) override;

 private:
  // Runs `body` for one call: refuses if broken; on any error marks the communicator
  // broken, and aborts the primitives if one of them failed.
  absl::Status Run(const CallSpec& spec, const CallOptions& options,
                   absl::FunctionRef<absl::Status(internal::NcclCall&)> body);

  const std::unique_ptr<CollectivePrimitives> primitives_;
  const int rank_;
  const int world_size_;
  FirstError broken_;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_NCCL_COMMUNICATOR_H_

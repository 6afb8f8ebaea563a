// InProcessCommunicator: the ranks of one group as threads of one process.
//
// Used by unit tests and the simulator (millions of collectives), so a call costs one
// mutex acquisition and, unless it is the last rank to arrive, one CondVar wait; no
// thread is ever created. The last rank to arrive checks that every rank called the
// same operation with the same tag and compatible sizes, then performs the whole
// collective (reading the other ranks' buffers, which stay valid because their owners
// are blocked in the call) and wakes the others. Reductions run in rank order 0, 1, ...
//
// Failures, all seen by every rank of the group (the group is then broken for good):
//  * desync (another op, tag, root or size) -> Internal("collective desync: rank 0
//    called AllReduce('vote'), rank 2 called Gather('responses')") on every rank;
//  * bad arguments (a root outside the group, counts that do not add up) ->
//    InvalidArgument naming the rank, on every rank;
//  * a rank that does not arrive before a waiting rank's deadline -> DeadlineExceeded
//    naming the tag and the missing ranks, on every rank that had arrived;
//  * a member destroyed or marked dead -> Unavailable on every peer;
//  * a rank that arrives after the group broke -> Unavailable naming the first error.
// After an error a communicator fails every later call with FailedPrecondition.
//
// Thread safety: as for every Communicator, one thread at a time per object; the
// ranks of a group are meant to be driven from different threads. MarkDead() may be
// called from any thread.
#ifndef LOCKSTEP_RUNTIME_COMM_IN_PROCESS_COMMUNICATOR_H_
#define LOCKSTEP_RUNTIME_COMM_IN_PROCESS_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm {

namespace internal {
class InProcessGroup;
struct InProcessCall;
}  // namespace internal

class InProcessCommunicator final : public Communicator {
 public:
  // Use MakeInProcessGroup().
  InProcessCommunicator(std::shared_ptr<internal::InProcessGroup> group, int rank);
  InProcessCommunicator(const InProcessCommunicator&) = delete;
  InProcessCommunicator& operator=(const InProcessCommunicator&) = delete;
  // Leaves the group: the peers' pending and later calls fail with Unavailable.
  ~InProcessCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override;

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

  // Simulates the crash of this rank: every peer's pending and later call fails with
  // Unavailable, and so does every later call on this object. Thread-safe.
  void MarkDead();

 private:
  // Enters the group's current collective with `call`; blocks until it completes,
  // fails, or the deadline passes.
  absl::Status Run(internal::InProcessCall& call, const CallOptions& options);

  const std::shared_ptr<internal::InProcessGroup> group_;
  const int rank_;
  int64_t calls_entered_ = 0;  // Collectives this rank has entered (its sequence number).
  FirstError broken_;          // The first error this rank saw (collective_protocol.h).
};

// A group of `world_size` (>= 1) ranks; element r is rank r. Every member may be
// destroyed independently (the shared state lives until the last one goes).
std::vector<std::unique_ptr<Communicator>> MakeInProcessGroup(int world_size);

// A group of one: every operation is a local copy (the reductions return the input).
std::unique_ptr<Communicator> MakeSoloCommunicator();

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_IN_PROCESS_COMMUNICATOR_H_

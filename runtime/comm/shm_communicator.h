// ShmCommunicator: the Communicator of one rank in a group whose ranks are processes
// (or threads) of one host, talking through a POSIX shared-memory segment instead of
// gloo's TCP loopback.
//
//   ShmOptions options;
//   options.name = ShmSegmentName("gen0", epoch, "exec");  // fresh per launch
//   options.rank = rank;
//   options.world_size = 4;
//   ASSIGN_OR_RETURN(std::unique_ptr<ShmCommunicator> comm, ShmCommunicator::Create(options));
//
// Transport (shm_segment.h, shm_group.h, shm_call.h, shm_direct.h): one segment per
// group, a slot per rank with sequence-numbered double round buffers, spin-then-futex
// waiting. A call is a header round that carries up to chunk_bytes of every rank's
// payload (the vote, the intake broadcast and the response gather are one round).
// Larger payloads (the MoE all-to-all-v) are either read by each receiver straight
// from the sender's buffer (one copy, process_vm_readv; when every rank can, probed at
// join) plus one round that releases the senders, or staged through the segment in
// one round per further chunk (two copies).
//
// Protocol: collective_protocol.h, with the header and payload in the same round.
// Unlike gloo, even calls of different ops meet, so they report a desync. How this
// transport reports its peers:
//  * a peer that does not arrive by the deadline is DeadlineExceeded naming the call
//    and the missing ranks;
//  * a peer that exited (its pid checked through a pidfd every liveness_interval while
//    waiting), left (destroyed its communicator) or broke (failed an earlier call) is
//    Unavailable — within the interval, never a wait to the deadline;
//  * after its first error this communicator marks its slot broken, so its peers see it.
//
// Safety: the segment is 0600, created with O_EXCL under a name that carries the
// group's epoch, and unlinked as soon as every rank has attached (see shm_group.h).
//
// Thread safety: one thread at a time (like every Communicator).
#ifndef LOCKSTEP_RUNTIME_COMM_SHM_COMMUNICATOR_H_
#define LOCKSTEP_RUNTIME_COMM_SHM_COMMUNICATOR_H_

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
#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_options.h"
#include "runtime/comm/shm_segment.h"

namespace lockstep::comm {

namespace internal {
class ShmCall;
class ShmGroup;
}  // namespace internal

class ShmCommunicator final : public Communicator {
 public:
  // Blocks until every rank of the group has attached, or options.connect_timeout.
  static absl::StatusOr<std::unique_ptr<ShmCommunicator>> Create(const ShmOptions& options);

  ShmCommunicator(const ShmCommunicator&) = delete;
  ShmCommunicator& operator=(const ShmCommunicator&) = delete;
  // Leaves the group: the peers' pending and later calls fail with Unavailable.
  ~ShmCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const std::string& name() const { return name_; }
  // Rounds this rank has published so far. Thread-safe (tests watch it from another
  // thread to act in the middle of a multi-round call).
  uint64_t rounds_published() const;

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
  explicit ShmCommunicator(std::unique_ptr<internal::ShmGroup> group);

  // Runs `body` for one call: refuses if broken, and marks the communicator (and its
  // slot, for the peers) broken on any error.
  absl::Status Run(const CallSpec& spec, const CallOptions& options,
                   absl::FunctionRef<absl::Status(internal::ShmCall&)> body);

  const std::unique_ptr<internal::ShmGroup> group_;
  const int rank_;
  const int world_size_;
  const std::string name_;
  FirstError broken_;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_SHM_COMMUNICATOR_H_

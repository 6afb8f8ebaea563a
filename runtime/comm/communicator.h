// The collective interface between the ranks of one instance (docs/design.md §3, §8).
//
// Every call is collective: all ranks of the group call the same operations, with the
// same tag, in the same order. Each call has a timeout; expiry returns
// DeadlineExceeded, a dead or unreachable peer returns Unavailable, and a call that
// does not match its peers (another op, tag or size) returns Internal ("collective
// desync ...") where the implementation can tell. After any error the communicator is
// broken: later calls fail at once with FailedPrecondition naming the first error.
//
// Implementations:
//  * InProcessCommunicator: ranks as threads; deterministic reduction order, checks
//    op/tag agreement.
//  * FaultyCommunicator: wraps another; injects failures, delays and input mutations
//    at the k-th call of a tag on rank r.
//  * GlooCommunicator: processes on any hosts, over TCP.
//  * ShmCommunicator: processes (or threads) of one host, over a shared-memory segment.
//  * NcclCommunicator: over the fixed-size primitives of a device collective library
//    (cuda::NcclGroup on GPUs; fake primitives in CPU tests).
// The multi-process ones (gloo, shm, NCCL) follow one per-operation protocol,
// collective_protocol.h; gloo and NCCL carry its header round as the header of
// collective_wire.h. Every implementation validates a call's arguments through
// the same per-op functions (collective_op.h), and testing/conformance.h with
// communicator_contract_test.cc hold each of them to this contract. The worker picks
// gloo, shm or auto (shm when every rank is on one host) per group from the config.
//
// Thread safety: one thread at a time per Communicator object. The executor thread and
// the engine thread each own their own Communicator (separate groups), so their
// collectives never interleave.
#ifndef LOCKSTEP_RUNTIME_COMM_COMMUNICATOR_H_
#define LOCKSTEP_RUNTIME_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace lockstep::comm {

enum class ReduceOp { kSum, kMin, kMax };

// Per-call options. `tag` names the call site ("vote", "intake", "moe.l3"); it is
// checked for agreement across ranks and used by fault injection and error messages.
struct CallOptions {
  absl::Duration timeout = absl::Seconds(30);
  absl::string_view tag = "";
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Element-wise reduction of `data` across ranks, in place. Same size on every rank.
  virtual absl::Status AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                 const CallOptions& options) = 0;

  // Fixed-size gather to all: `out` (size world_size * in.size()) receives rank r's
  // `in` at offset r * in.size().
  virtual absl::Status AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                 const CallOptions& options) = 0;

  // Variable-size gather to all: result[r] is rank r's bytes.
  virtual absl::StatusOr<std::vector<std::string>> AllGatherBytes(absl::string_view data,
                                                                  const CallOptions& options) = 0;

  // Root's `*data` replaces `*data` on every other rank (sizes may differ before).
  virtual absl::Status Broadcast(std::string* data, int root, const CallOptions& options) = 0;

  // Variable-size gather to `root`: on root, result[r] is rank r's bytes; on other
  // ranks the result is empty.
  virtual absl::StatusOr<std::vector<std::string>> Gather(absl::string_view data, int root,
                                                          const CallOptions& options) = 0;

  // Fixed-size all-to-all: `send` and `recv` both have world_size * n elements; block
  // r of `send` goes to rank r, block r of `recv` comes from rank r.
  virtual absl::Status AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                                const CallOptions& options) = 0;

  // Variable-size all-to-all of floats (the MoE dispatch and combine). `send` holds
  // send_counts[r] floats for each rank r back to back; `recv` must hold
  // recv_counts[r] floats from each rank r back to back (exchange counts first with
  // AllToAll). Counts must agree pairwise; a mismatch is an error.
  virtual absl::Status AllToAllV(absl::Span<const float> send,
                                 absl::Span<const int64_t> send_counts, absl::Span<float> recv,
                                 absl::Span<const int64_t> recv_counts,
                                 const CallOptions& options) = 0;

  // Variable-size all-to-all of bytes: send[r] goes to rank r; result[r] came from r.
  virtual absl::StatusOr<std::vector<std::string>> AllToAllBytes(
      const std::vector<std::string>& send, const CallOptions& options) = 0;

  virtual absl::Status Barrier(const CallOptions& options) = 0;
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COMMUNICATOR_H_

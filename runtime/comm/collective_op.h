// Names of the collective operations of the Communicator interface, shared by every
// implementation so that errors and fault-injection rules name calls the same way:
// "AllReduce('vote')".
#ifndef LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_
#define LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm {

// One value per method of Communicator (except rank() and world_size()).
enum class CollectiveOp {
  kAllReduce,
  kAllGather,
  kAllGatherBytes,
  kBroadcast,
  kGather,
  kAllToAll,
  kAllToAllV,
  kAllToAllBytes,
  kBarrier,
};

// "AllReduce", "Gather", ... (the method name).
absl::string_view CollectiveOpName(CollectiveOp op);

// "sum", "min", "max".
absl::string_view ReduceOpName(ReduceOp op);

// "AllReduce('vote')": how errors name one rank's call.
std::string DescribeCall(CollectiveOp op, absl::string_view tag);

// InvalidArgument("AllToAllV('moe.l3') on rank 2: <problem>").
absl::Status InvalidCallArgument(CollectiveOp op, absl::string_view tag, int rank,
                                 absl::string_view problem);

// Checks one side of an AllToAllV: `counts` has one non-negative entry per rank and
// they add up to at most `capacity` floats. `side` is "send" or "recv".
absl::Status CheckAllToAllVCounts(absl::string_view tag, int rank, absl::string_view side,
                                  absl::Span<const int64_t> counts, size_t capacity, int world);

// A 40-bit fingerprint of a call: the op, the tag and `args` (sizes, root, reduce op).
// Transports that cannot compare calls directly exchange it to detect a desync. The
// same in every process (no per-process hash seed); 40 bits keep sums of up to 2^20
// fingerprints inside an int64.
int64_t CallFingerprint(CollectiveOp op, absl::string_view tag,
                        std::initializer_list<int64_t> args = {});

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_

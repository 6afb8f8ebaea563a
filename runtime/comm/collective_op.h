// Names of the collective operations of the Communicator interface, shared by every
// implementation so that errors and fault-injection rules name calls the same way:
// "AllReduce('vote')".
#ifndef LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_
#define LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_

#include <string>

#include "absl/strings/string_view.h"
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

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_COLLECTIVE_OP_H_

// The arguments of one rank's call to an InProcessCommunicator collective, and the
// functions that validate and perform each collective over all ranks' calls (run by
// the last rank to arrive, under the group's mutex). Internal to
// InProcessCommunicator.
#ifndef LOCKSTEP_RUNTIME_COMM_IN_PROCESS_CALL_H_
#define LOCKSTEP_RUNTIME_COMM_IN_PROCESS_CALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm::internal {

// One rank's arguments to one collective. Lives on the caller's stack for the duration
// of the call; only the fields of its `op` are set.
struct InProcessCall {
  CollectiveOp op = CollectiveOp::kBarrier;
  absl::string_view tag;
  int rank = 0;
  // kAllReduce: reduced in place.
  absl::Span<int64_t> inout;
  ReduceOp reduce = ReduceOp::kSum;
  // kAllGather, kAllToAll.
  absl::Span<const int64_t> in;
  absl::Span<int64_t> out;
  // kAllGatherBytes and kGather read `bytes`; kBroadcast reads and writes `*bytes_inout`.
  absl::string_view bytes;
  std::string* bytes_inout = nullptr;
  int root = 0;
  // kAllGatherBytes, kGather, kAllToAllBytes: the caller's result.
  std::vector<std::string>* bytes_out = nullptr;
  const std::vector<std::string>* bytes_send = nullptr;
  // kAllToAllV.
  absl::Span<const float> float_send;
  absl::Span<const int64_t> send_counts;
  absl::Span<float> float_recv;
  absl::Span<const int64_t> recv_counts;
};

// Checks that every call names the same op and tag, then validates and performs the
// collective on every rank's buffers, in rank order. `scratch` is reused memory.
// Returns the error every rank must see (Internal for a desync, InvalidArgument for
// a rank's bad arguments).
absl::Status ExecuteCollective(absl::Span<InProcessCall* const> calls,
                               std::vector<int64_t>& scratch);

}  // namespace lockstep::comm::internal

#endif  // LOCKSTEP_RUNTIME_COMM_IN_PROCESS_CALL_H_

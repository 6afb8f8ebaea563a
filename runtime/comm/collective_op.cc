#include "runtime/comm/collective_op.h"

#include "absl/strings/str_cat.h"

namespace lockstep::comm {

absl::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "AllReduce";
    case CollectiveOp::kAllGather:
      return "AllGather";
    case CollectiveOp::kAllGatherBytes:
      return "AllGatherBytes";
    case CollectiveOp::kBroadcast:
      return "Broadcast";
    case CollectiveOp::kGather:
      return "Gather";
    case CollectiveOp::kAllToAll:
      return "AllToAll";
    case CollectiveOp::kAllToAllV:
      return "AllToAllV";
    case CollectiveOp::kAllToAllBytes:
      return "AllToAllBytes";
    case CollectiveOp::kBarrier:
      return "Barrier";
  }
  return "UnknownOp";
}

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown";
}

std::string DescribeCall(CollectiveOp op, absl::string_view tag) {
  return absl::StrCat(CollectiveOpName(op), "('", tag, "')");
}

}  // namespace lockstep::comm

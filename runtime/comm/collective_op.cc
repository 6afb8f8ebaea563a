#include "runtime/comm/collective_op.h"

#include "absl/strings/str_cat.h"
#include "common/hash.h"

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

absl::Status InvalidCallArgument(CollectiveOp op, absl::string_view tag, int rank,
                                 absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(DescribeCall(op, tag), " on rank ", rank, ": ", problem));
}

absl::Status CheckAllToAllVCounts(absl::string_view tag, int rank, absl::string_view side,
                                  absl::Span<const int64_t> counts, size_t capacity, int world) {
  auto bad = [&](absl::string_view problem) {
    return InvalidCallArgument(CollectiveOp::kAllToAllV, tag, rank, problem);
  };
  if (counts.size() != static_cast<size_t>(world)) {
    return bad(absl::StrCat(side, "_counts has ", counts.size(),
                            " entries, expected one per rank (", world, ")"));
  }
  int64_t total = 0;
  for (int r = 0; r < world; ++r) {
    if (counts[r] < 0) {
      return bad(absl::StrCat(side, "_counts[", r, "] is negative (", counts[r], ")"));
    }
    total += counts[r];
  }
  if (static_cast<size_t>(total) > capacity) {
    return bad(
        absl::StrCat(side, "_counts add up to ", total, " floats but ", side, " holds ", capacity));
  }
  return absl::OkStatus();
}

int64_t CallFingerprint(CollectiveOp op, absl::string_view tag,
                        std::initializer_list<int64_t> args) {
  // FNV-1a over the op, the tag bytes and the arguments (little-endian).
  Fnv1a64 h;
  h.AddByte(static_cast<uint8_t>(op));
  h.Add(tag);
  h.AddByte(0xff);
  for (int64_t arg : args) {
    for (int shift = 0; shift < 64; shift += 8)
      h.AddByte(static_cast<uint8_t>(static_cast<uint64_t>(arg) >> shift));
  }
  return static_cast<int64_t>(h.value() & ((uint64_t{1} << 40) - 1));
}

}  // namespace lockstep::comm

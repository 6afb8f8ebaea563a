#include "runtime/comm/collective_op.h"

#include <algorithm>
#include <utility>

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

void ReduceInRankOrder(int64_t* out, int64_t count, absl::Span<const char* const> inputs,
                       ReduceOp op) {
  const auto* first = reinterpret_cast<const int64_t*>(inputs[0]);
  if (first != out) std::copy_n(first, count, out);
  for (size_t r = 1; r < inputs.size(); ++r) {
    const auto* in = reinterpret_cast<const int64_t*>(inputs[r]);
    switch (op) {
      case ReduceOp::kSum:
        for (int64_t i = 0; i < count; ++i) {
          out[i] =
              static_cast<int64_t>(static_cast<uint64_t>(out[i]) + static_cast<uint64_t>(in[i]));
        }
        break;
      case ReduceOp::kMin:
        for (int64_t i = 0; i < count; ++i) out[i] = std::min(out[i], in[i]);
        break;
      case ReduceOp::kMax:
        for (int64_t i = 0; i < count; ++i) out[i] = std::max(out[i], in[i]);
        break;
    }
  }
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

size_t CallArgCount(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kGather:
      return 1;
    default:
      return 0;
  }
}

std::string DescribeCallArgs(CollectiveOp op, absl::string_view tag,
                             absl::Span<const int64_t> args) {
  std::string out = DescribeCall(op, tag);
  const int64_t n = args.empty() ? 0 : args[0];
  switch (op) {
    case CollectiveOp::kAllReduce:
      return absl::StrCat(out, " with ", n, " elements (",
                          ReduceOpName(static_cast<ReduceOp>(args.size() > 1 ? args[1] : 0)), ")");
    case CollectiveOp::kAllGather:
      return absl::StrCat(out, " with ", n, " elements");
    case CollectiveOp::kAllToAll:
      return absl::StrCat(out, " with ", n, " elements per rank");
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kGather:
      return absl::StrCat(out, " with root ", n);
    default:
      return out;
  }
}

namespace {

CallSpec MakeSpec(CollectiveOp op, absl::string_view tag, std::initializer_list<int64_t> args,
                  absl::Status local) {
  CallSpec spec;
  spec.op = op;
  spec.tag = tag;
  for (int64_t arg : args) spec.args[spec.num_args++] = arg;
  spec.fp = CallFingerprint(op, tag, args);
  spec.local = std::move(local);
  return spec;
}

absl::Status CheckRoot(CollectiveOp op, absl::string_view tag, int rank, int world, int root) {
  if (root >= 0 && root < world) return absl::OkStatus();
  return InvalidCallArgument(op, tag, rank,
                             absl::StrCat("root ", root, " is outside the group of ", world));
}

}  // namespace

CallSpec SpecAllReduce(absl::string_view tag, size_t n, ReduceOp reduce) {
  return MakeSpec(CollectiveOp::kAllReduce, tag,
                  {static_cast<int64_t>(n), static_cast<int64_t>(reduce)}, absl::OkStatus());
}

CallSpec SpecBarrier(absl::string_view tag) {
  return MakeSpec(CollectiveOp::kBarrier, tag, {}, absl::OkStatus());
}

CallSpec SpecAllGather(absl::string_view tag, int rank, int world, size_t in, size_t out) {
  absl::Status local;
  if (out != in * world) {
    local = InvalidCallArgument(
        CollectiveOp::kAllGather, tag, rank,
        absl::StrCat("out has ", out, " elements, expected ", world, " * ", in));
  }
  return MakeSpec(CollectiveOp::kAllGather, tag, {static_cast<int64_t>(in)}, std::move(local));
}

CallSpec SpecAllGatherBytes(absl::string_view tag) {
  return MakeSpec(CollectiveOp::kAllGatherBytes, tag, {}, absl::OkStatus());
}

CallSpec SpecRooted(CollectiveOp op, absl::string_view tag, int rank, int world, int root) {
  return MakeSpec(op, tag, {root}, CheckRoot(op, tag, rank, world, root));
}

CallSpec SpecAllToAll(absl::string_view tag, int rank, int world, size_t send, size_t recv) {
  absl::Status local;
  if (send % world != 0 || recv != send) {
    local = InvalidCallArgument(
        CollectiveOp::kAllToAll, tag, rank,
        absl::StrCat("send has ", send, " and recv ", recv,
                     " elements; both must be the same multiple of the world size ", world));
  }
  return MakeSpec(CollectiveOp::kAllToAll, tag, {static_cast<int64_t>(send / world)},
                  std::move(local));
}

CallSpec SpecAllToAllV(absl::string_view tag, int rank, int world,
                       absl::Span<const int64_t> send_counts, size_t send_capacity,
                       absl::Span<const int64_t> recv_counts, size_t recv_capacity) {
  absl::Status local = CheckAllToAllVCounts(tag, rank, "send", send_counts, send_capacity, world);
  if (local.ok()) {
    local = CheckAllToAllVCounts(tag, rank, "recv", recv_counts, recv_capacity, world);
  }
  return MakeSpec(CollectiveOp::kAllToAllV, tag, {}, std::move(local));
}

CallSpec SpecAllToAllBytes(absl::string_view tag, int rank, int world, size_t send_entries) {
  absl::Status local;
  if (send_entries != static_cast<size_t>(world)) {
    local = InvalidCallArgument(
        CollectiveOp::kAllToAllBytes, tag, rank,
        absl::StrCat("send has ", send_entries, " entries, expected one per rank (", world, ")"));
  }
  return MakeSpec(CollectiveOp::kAllToAllBytes, tag, {}, std::move(local));
}

absl::Status CheckAllToAllVPairs(const CallSpec& spec, int world, absl::string_view unit,
                                 absl::FunctionRef<int64_t(int s, int r)> sent,
                                 absl::FunctionRef<int64_t(int r, int s)> expected) {
  for (int s = 0; s < world; ++s) {
    for (int r = 0; r < world; ++r) {
      const int64_t out = sent(s, r);
      const int64_t in = expected(r, s);
      if (out != in) {
        return absl::InternalError(
            absl::StrCat("collective desync: ", DescribeCall(spec.op, spec.tag), ": rank ", s,
                         " sends ", out, " ", unit, " to rank ", r, ", which expects ", in));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lockstep::comm

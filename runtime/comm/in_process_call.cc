#include "runtime/comm/in_process_call.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace lockstep::comm::internal {
namespace {

using Calls = absl::Span<InProcessCall* const>;

absl::Status Desync(const InProcessCall& a, absl::string_view a_detail, const InProcessCall& b,
                    absl::string_view b_detail) {
  return absl::InternalError(absl::StrCat("collective desync: rank ", a.rank, " called ",
                                          DescribeCall(a.op, a.tag), a_detail, ", rank ", b.rank,
                                          " called ", DescribeCall(b.op, b.tag), b_detail));
}

absl::Status BadArgument(const InProcessCall& call, absl::string_view problem) {
  return InvalidCallArgument(call.op, call.tag, call.rank, problem);
}

std::string Elements(size_t n) { return absl::StrCat(" with ", n, " elements"); }

// Every rank must name the same size, compared with rank 0.
template <typename SizeFn>
absl::Status CheckSameSize(Calls calls, SizeFn size) {
  for (const InProcessCall* call : calls) {
    if (size(*call) != size(*calls[0])) {
      return Desync(*calls[0], Elements(size(*calls[0])), *call, Elements(size(*call)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRoot(Calls calls) {
  for (const InProcessCall* call : calls) {
    if (call->root != calls[0]->root) {
      return Desync(*calls[0], absl::StrCat(" with root ", calls[0]->root), *call,
                    absl::StrCat(" with root ", call->root));
    }
  }
  if (calls[0]->root < 0 || calls[0]->root >= static_cast<int>(calls.size())) {
    return BadArgument(*calls[0], absl::StrCat("root ", calls[0]->root, " is outside the group of ",
                                               calls.size()));
  }
  return absl::OkStatus();
}

absl::Status RunAllReduce(Calls calls) {
  RETURN_IF_ERROR(CheckSameSize(calls, [](const InProcessCall& c) { return c.inout.size(); }));
  for (const InProcessCall* call : calls) {
    if (call->reduce != calls[0]->reduce) {
      return Desync(*calls[0], absl::StrCat(" with op ", ReduceOpName(calls[0]->reduce)), *call,
                    absl::StrCat(" with op ", ReduceOpName(call->reduce)));
    }
  }
  // Reduce into rank 0's buffer in rank order, then copy it to the others.
  absl::Span<int64_t> acc = calls[0]->inout;
  for (size_t r = 1; r < calls.size(); ++r) {
    const int64_t* in = calls[r]->inout.data();
    switch (calls[0]->reduce) {
      case ReduceOp::kSum:
        // Two's complement wrap-around, like the transports, without signed overflow.
        for (size_t i = 0; i < acc.size(); ++i) {
          acc[i] =
              static_cast<int64_t>(static_cast<uint64_t>(acc[i]) + static_cast<uint64_t>(in[i]));
        }
        break;
      case ReduceOp::kMin:
        for (size_t i = 0; i < acc.size(); ++i) acc[i] = std::min(acc[i], in[i]);
        break;
      case ReduceOp::kMax:
        for (size_t i = 0; i < acc.size(); ++i) acc[i] = std::max(acc[i], in[i]);
        break;
    }
  }
  for (size_t r = 1; r < calls.size(); ++r) {
    std::copy(acc.begin(), acc.end(), calls[r]->inout.begin());
  }
  return absl::OkStatus();
}

absl::Status RunAllGather(Calls calls) {
  RETURN_IF_ERROR(CheckSameSize(calls, [](const InProcessCall& c) { return c.in.size(); }));
  const size_t n = calls[0]->in.size();
  for (const InProcessCall* call : calls) {
    if (call->out.size() != n * calls.size()) {
      return BadArgument(*call, absl::StrCat("out has ", call->out.size(), " elements, expected ",
                                             calls.size(), " * ", n));
    }
  }
  for (const InProcessCall* dst : calls) {
    for (size_t s = 0; s < calls.size(); ++s) {
      // memmove: `in` may be the rank's own block of `out`.
      std::memmove(dst->out.data() + s * n, calls[s]->in.data(), n * sizeof(int64_t));
    }
  }
  return absl::OkStatus();
}

absl::Status RunAllGatherBytes(Calls calls) {
  for (const InProcessCall* dst : calls) {
    dst->bytes_out->resize(calls.size());
    for (size_t s = 0; s < calls.size(); ++s) {
      (*dst->bytes_out)[s].assign(calls[s]->bytes.data(), calls[s]->bytes.size());
    }
  }
  return absl::OkStatus();
}

absl::Status RunBroadcast(Calls calls) {
  RETURN_IF_ERROR(CheckRoot(calls));
  const std::string& value = *calls[calls[0]->root]->bytes_inout;
  for (const InProcessCall* dst : calls) {
    if (dst->rank != calls[0]->root) *dst->bytes_inout = value;
  }
  return absl::OkStatus();
}

absl::Status RunGather(Calls calls) {
  RETURN_IF_ERROR(CheckRoot(calls));
  for (const InProcessCall* dst : calls) dst->bytes_out->clear();
  std::vector<std::string>& out = *calls[calls[0]->root]->bytes_out;
  out.resize(calls.size());
  for (size_t s = 0; s < calls.size(); ++s) {
    out[s].assign(calls[s]->bytes.data(), calls[s]->bytes.size());
  }
  return absl::OkStatus();
}

absl::Status RunAllToAll(Calls calls) {
  RETURN_IF_ERROR(CheckSameSize(calls, [](const InProcessCall& c) { return c.in.size(); }));
  const size_t world = calls.size();
  for (const InProcessCall* call : calls) {
    if (call->in.size() % world != 0 || call->out.size() != call->in.size()) {
      return BadArgument(*call,
                         absl::StrCat("send has ", call->in.size(), " and recv ", call->out.size(),
                                      " elements; both must be the same "
                                      "multiple of the world size ",
                                      world));
    }
  }
  const size_t n = calls[0]->in.size() / world;
  for (size_t r = 0; r < world; ++r) {
    for (size_t s = 0; s < world; ++s) {
      std::memcpy(calls[r]->out.data() + s * n, calls[s]->in.data() + r * n, n * sizeof(int64_t));
    }
  }
  return absl::OkStatus();
}

absl::Status RunAllToAllV(Calls calls, std::vector<int64_t>& send_offsets) {
  const size_t world = calls.size();
  for (const InProcessCall* call : calls) {
    RETURN_IF_ERROR(CheckAllToAllVCounts(call->tag, call->rank, "send", call->send_counts,
                                         call->float_send.size(), world));
    RETURN_IF_ERROR(CheckAllToAllVCounts(call->tag, call->rank, "recv", call->recv_counts,
                                         call->float_recv.size(), world));
  }
  for (size_t s = 0; s < world; ++s) {
    for (size_t r = 0; r < world; ++r) {
      if (calls[s]->send_counts[r] != calls[r]->recv_counts[s]) {
        return absl::InternalError(
            absl::StrCat("collective desync: ", DescribeCall(calls[s]->op, calls[s]->tag),
                         ": rank ", s, " sends ", calls[s]->send_counts[r], " floats to rank ", r,
                         ", which expects ", calls[r]->recv_counts[s]));
      }
    }
  }
  // send_offsets[s * world + r]: where rank s's block for rank r starts.
  send_offsets.assign(world * world, 0);
  for (size_t s = 0; s < world; ++s) {
    int64_t offset = 0;
    for (size_t r = 0; r < world; ++r) {
      send_offsets[s * world + r] = offset;
      offset += calls[s]->send_counts[r];
    }
  }
  for (size_t r = 0; r < world; ++r) {
    float* dst = calls[r]->float_recv.data();
    for (size_t s = 0; s < world; ++s) {
      const int64_t count = calls[r]->recv_counts[s];
      std::memcpy(dst, calls[s]->float_send.data() + send_offsets[s * world + r],
                  count * sizeof(float));
      dst += count;
    }
  }
  return absl::OkStatus();
}

absl::Status RunAllToAllBytes(Calls calls) {
  const size_t world = calls.size();
  for (const InProcessCall* call : calls) {
    if (call->bytes_send->size() != world) {
      return BadArgument(*call, absl::StrCat("send has ", call->bytes_send->size(),
                                             " entries, expected one per rank (", world, ")"));
    }
  }
  for (size_t r = 0; r < world; ++r) {
    std::vector<std::string>& out = *calls[r]->bytes_out;
    out.resize(world);
    for (size_t s = 0; s < world; ++s) out[s] = (*calls[s]->bytes_send)[r];
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ExecuteCollective(Calls calls, std::vector<int64_t>& scratch) {
  for (const InProcessCall* call : calls) {
    if (call->op != calls[0]->op || call->tag != calls[0]->tag) {
      return Desync(*calls[0], "", *call, "");
    }
  }
  switch (calls[0]->op) {
    case CollectiveOp::kAllReduce:
      return RunAllReduce(calls);
    case CollectiveOp::kAllGather:
      return RunAllGather(calls);
    case CollectiveOp::kAllGatherBytes:
      return RunAllGatherBytes(calls);
    case CollectiveOp::kBroadcast:
      return RunBroadcast(calls);
    case CollectiveOp::kGather:
      return RunGather(calls);
    case CollectiveOp::kAllToAll:
      return RunAllToAll(calls);
    case CollectiveOp::kAllToAllV:
      return RunAllToAllV(calls, scratch);
    case CollectiveOp::kAllToAllBytes:
      return RunAllToAllBytes(calls);
    case CollectiveOp::kBarrier:
      return absl::OkStatus();
  }
  return absl::InternalError("unknown collective op");
}

}  // namespace lockstep::comm::internal

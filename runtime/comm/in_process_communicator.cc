#include "runtime/comm/in_process_communicator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "runtime/comm/collective_op.h"

namespace lockstep::comm {
namespace internal {

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

namespace {

using Calls = absl::Span<InProcessCall* const>;

absl::Status Desync(const InProcessCall& a, absl::string_view a_detail, const InProcessCall& b,
                    absl::string_view b_detail) {
  return absl::InternalError(absl::StrCat("collective desync: rank ", a.rank, " called ",
                                          DescribeCall(a.op, a.tag), a_detail, ", rank ", b.rank,
                                          " called ", DescribeCall(b.op, b.tag), b_detail));
}

absl::Status BadArgument(const InProcessCall& call, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(DescribeCall(call.op, call.tag), " on rank ", call.rank, ": ", problem));
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

// Checks one side of an AllToAllV: `counts` has one non-negative entry per rank and
// they add up to at most `capacity` floats.
absl::Status CheckCounts(const InProcessCall& call, absl::string_view side,
                         absl::Span<const int64_t> counts, size_t capacity, size_t world) {
  if (counts.size() != world) {
    return BadArgument(call, absl::StrCat(side, "_counts has ", counts.size(),
                                          " entries, expected one per rank (", world, ")"));
  }
  int64_t total = 0;
  for (size_t r = 0; r < world; ++r) {
    if (counts[r] < 0) {
      return BadArgument(call,
                         absl::StrCat(side, "_counts[", r, "] is negative (", counts[r], ")"));
    }
    total += counts[r];
  }
  if (static_cast<size_t>(total) > capacity) {
    return BadArgument(call, absl::StrCat(side, "_counts add up to ", total, " floats but ", side,
                                          " holds ", capacity));
  }
  return absl::OkStatus();
}

absl::Status RunAllToAllV(Calls calls, std::vector<int64_t>& send_offsets) {
  const size_t world = calls.size();
  for (const InProcessCall* call : calls) {
    RETURN_IF_ERROR(CheckCounts(*call, "send", call->send_counts, call->float_send.size(), world));
    RETURN_IF_ERROR(CheckCounts(*call, "recv", call->recv_counts, call->float_recv.size(), world));
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

// The state shared by the members of one group. A collective completes when the last
// rank arrives: under `mu_` it validates and performs the operation on every rank's
// buffers and advances `generation_`. The first failure is kept forever in `failure_`;
// no collective completes after it.
class InProcessGroup {
 public:
  explicit InProcessGroup(int world_size)
      : world_size_(world_size), arrived_calls_(world_size, nullptr) {}

  int world_size() const { return world_size_; }

  // Enters collective number `seq` (the caller's count of entered collectives).
  absl::Status Enter(InProcessCall* call, int64_t seq, const CallOptions& options)
      ABSL_LOCKS_EXCLUDED(mu_) {
    const absl::Time deadline = absl::Now() + options.timeout;
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) {
      return absl::UnavailableError(
          absl::StrCat("rank ", call->rank, " called ", DescribeCall(call->op, call->tag),
                       " but its in-process group is broken: ", failure_.ToString()));
    }
    LOCKSTEP_CHECK(seq == generation_)
        << "rank " << call->rank << " entered collective " << seq << " during " << generation_;
    arrived_calls_[call->rank] = call;
    if (++arrived_ == world_size_) {
      absl::Status status = ExecuteLocked();
      arrived_ = 0;
      std::fill(arrived_calls_.begin(), arrived_calls_.end(), nullptr);
      if (status.ok()) {
        ++generation_;
      } else {
        failure_ = status;
      }
      if (world_size_ > 1) cv_.SignalAll();
      return status;
    }
    while (true) {
      if (generation_ > seq) return absl::OkStatus();
      if (!failure_.ok()) return failure_;
      if (cv_.WaitWithDeadline(&mu_, deadline) && generation_ == seq && failure_.ok()) {
        failure_ = absl::DeadlineExceededError(
            absl::StrCat("collective ", DescribeCall(call->op, call->tag), " timed out after ",
                         absl::FormatDuration(options.timeout), " on rank ", call->rank,
                         ": rank(s) ", MissingRanksLocked(), " did not arrive"));
        std::fill(arrived_calls_.begin(), arrived_calls_.end(), nullptr);
        cv_.SignalAll();
        return failure_;
      }
    }
  }

  // Breaks the group for good: pending and later calls fail with Unavailable.
  void Kill(int rank, absl::string_view why) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return;
    failure_ = absl::UnavailableError(
        absl::StrCat("rank ", rank, " of the in-process group is gone (", why, ")"));
    std::fill(arrived_calls_.begin(), arrived_calls_.end(), nullptr);
    cv_.SignalAll();
  }

 private:
  absl::Status ExecuteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Calls calls(arrived_calls_);
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
        return RunAllToAllV(calls, scratch_offsets_);
      case CollectiveOp::kAllToAllBytes:
        return RunAllToAllBytes(calls);
      case CollectiveOp::kBarrier:
        return absl::OkStatus();
    }
    return absl::InternalError("unknown collective op");
  }

  std::string MissingRanksLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<int> missing;
    for (int r = 0; r < world_size_; ++r) {
      if (arrived_calls_[r] == nullptr) missing.push_back(r);
    }
    return absl::StrJoin(missing, ", ");
  }

  const int world_size_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Collectives completed.
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;         // Ranks inside collective `generation_`.
  // Per rank: its call to collective `generation_`, or null if it has not arrived.
  std::vector<InProcessCall*> arrived_calls_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> scratch_offsets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

using internal::InProcessCall;

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<internal::InProcessGroup> group,
                                             int rank)
    : group_(std::move(group)), rank_(rank) {
  LOCKSTEP_CHECK(rank_ >= 0 && rank_ < group_->world_size()) << "rank " << rank_;
}

InProcessCommunicator::~InProcessCommunicator() { group_->Kill(rank_, "communicator destroyed"); }

int InProcessCommunicator::world_size() const { return group_->world_size(); }

void InProcessCommunicator::MarkDead() { group_->Kill(rank_, "marked dead"); }

absl::Status InProcessCommunicator::Run(InProcessCall& call, const CallOptions& options) {
  if (!broken_.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "communicator of rank ", rank_, " is broken by an earlier error: ", broken_.ToString()));
  }
  call.tag = options.tag;
  call.rank = rank_;
  absl::Status status = group_->Enter(&call, calls_entered_++, options);
  if (!status.ok()) broken_ = status;
  return status;
}

absl::Status InProcessCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                              const CallOptions& options) {
  InProcessCall call{.op = CollectiveOp::kAllReduce};
  call.inout = data;
  call.reduce = op;
  return Run(call, options);
}

absl::Status InProcessCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                              const CallOptions& options) {
  InProcessCall call{.op = CollectiveOp::kAllGather};
  call.in = in;
  call.out = out;
  return Run(call, options);
}

absl::StatusOr<std::vector<std::string>> InProcessCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  std::vector<std::string> result;
  InProcessCall call{.op = CollectiveOp::kAllGatherBytes};
  call.bytes = data;
  call.bytes_out = &result;
  RETURN_IF_ERROR(Run(call, options));
  return result;
}

absl::Status InProcessCommunicator::Broadcast(std::string* data, int root,
                                              const CallOptions& options) {
  InProcessCall call{.op = CollectiveOp::kBroadcast};
  call.bytes_inout = data;
  call.root = root;
  return Run(call, options);
}

absl::StatusOr<std::vector<std::string>> InProcessCommunicator::Gather(absl::string_view data,
                                                                       int root,
                                                                       const CallOptions& options) {
  std::vector<std::string> result;
  InProcessCall call{.op = CollectiveOp::kGather};
  call.bytes = data;
  call.root = root;
  call.bytes_out = &result;
  RETURN_IF_ERROR(Run(call, options));
  return result;
}

absl::Status InProcessCommunicator::AllToAll(absl::Span<const int64_t> send,
                                             absl::Span<int64_t> recv, const CallOptions& options) {
  InProcessCall call{.op = CollectiveOp::kAllToAll};
  call.in = send;
  call.out = recv;
  return Run(call, options);
}

absl::Status InProcessCommunicator::AllToAllV(absl::Span<const float> send,
                                              absl::Span<const int64_t> send_counts,
                                              absl::Span<float> recv,
                                              absl::Span<const int64_t> recv_counts,
                                              const CallOptions& options) {
  InProcessCall call{.op = CollectiveOp::kAllToAllV};
  call.float_send = send;
  call.send_counts = send_counts;
  call.float_recv = recv;
  call.recv_counts = recv_counts;
  return Run(call, options);
}

absl::StatusOr<std::vector<std::string>> InProcessCommunicator::AllToAllBytes(
    const std::vector<std::string>& send, const CallOptions& options) {
  std::vector<std::string> result;
  InProcessCall call{.op = CollectiveOp::kAllToAllBytes};
  call.bytes_send = &send;
  call.bytes_out = &result;
  RETURN_IF_ERROR(Run(call, options));
  return result;
}

absl::Status InProcessCommunicator::Barrier(const CallOptions& options) {
  InProcessCall call{.op = CollectiveOp::kBarrier};
  return Run(call, options);
}

std::vector<std::unique_ptr<Communicator>> MakeInProcessGroup(int world_size) {
  LOCKSTEP_CHECK(world_size >= 1) << "in-process group of " << world_size << " ranks";
  auto group = std::make_shared<internal::InProcessGroup>(world_size);
  std::vector<std::unique_ptr<Communicator>> members;
  members.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    members.push_back(std::make_unique<InProcessCommunicator>(group, r));
  }
  return members;
}

std::unique_ptr<Communicator> MakeSoloCommunicator() {
  return std::move(MakeInProcessGroup(1).front());
}

}  // namespace lockstep::comm

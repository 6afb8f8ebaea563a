#include "runtime/comm/in_process_communicator.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/in_process_call.h"

namespace lockstep::comm {
namespace internal {

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
    return ExecuteCollective(arrived_calls_, scratch_offsets_);
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
  RETURN_IF_ERROR(broken_.CheckUsable(absl::StrCat("communicator of rank ", rank_)));
  call.tag = options.tag;
  call.rank = rank_;
  absl::Status status = group_->Enter(&call, calls_entered_++, options);
  broken_.Record(status);
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

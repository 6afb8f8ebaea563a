#include "runtime/cuda/cpu/nccl/ops.h"

#include <signal.h>

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/cuda/cpu/nccl/reduce.h"

namespace lockstep::cuda_cpu::nccl {
namespace {

ncclResult_t ResultOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return ncclInvalidUsage;
    case absl::StatusCode::kUnavailable:
      return ncclRemoteError;
    default:
      return ncclInternalError;
  }
}

// One operation's transfers and the local work before and after them.
class Plan {
 public:
  explicit Plan(const CommState& comm) : comm_(comm) {}

  absl::Status Add(const Item& item) {
    const size_t bytes = item.count * TypeBytes(item.type);
    const int me = comm_.rank;
    CallInfo info{item.call, item.type, item.count, item.root,
                  item.call == Call::kAllReduce || item.call == Call::kReduceScatter
                      ? static_cast<int>(item.redop)
                      : -1};
    char* const out = static_cast<char*>(item.out);
    char* const in = const_cast<char*>(static_cast<const char*>(item.send));
    switch (item.call) {
      case Call::kSendRecv:
        if (item.root == me) {
          (item.recv ? self_recvs_ : self_sends_).push_back(item);
        } else {
          transfers_.push_back({item.root, !item.recv, item.recv ? out : in, bytes, info});
        }
        return absl::OkStatus();
      case Call::kAllGather:
        if (in != out + me * bytes)
          before_.push_back([=] { std::memmove(out + me * bytes, in, bytes); });
        for (int p = 0; p < comm_.world; ++p) {
          if (p == me) continue;
          transfers_.push_back({p, true, in, bytes, info});
          transfers_.push_back({p, false, out + p * bytes, bytes, info});
        }
        return absl::OkStatus();
      case Call::kBroadcast:
        if (item.root == me) {
          if (in != out) before_.push_back([=] { std::memmove(out, in, bytes); });
          for (int p = 0; p < comm_.world; ++p) {
            if (p != me) transfers_.push_back({p, true, in, bytes, info});
          }
        } else {
          transfers_.push_back({item.root, false, out, bytes, info});
        }
        return absl::OkStatus();
      case Call::kAllReduce:
      case Call::kReduceScatter: {
        const bool scatter = item.call == Call::kReduceScatter;
        char* const scratch = Scratch(comm_.world * bytes);
        std::vector<const void*> inputs(comm_.world);
        for (int p = 0; p < comm_.world; ++p) {
          if (p == me) {
            inputs[p] = scatter ? in + me * bytes : in;
            continue;
          }
          inputs[p] = scratch + p * bytes;
          transfers_.push_back({p, true, scatter ? in + p * bytes : in, bytes, info});
          transfers_.push_back({p, false, scratch + p * bytes, bytes, info});
        }
        after_.push_back(
            [=] { ReduceInRankOrder(item.type, item.redop, inputs, item.count, out); });
        return absl::OkStatus();
      }
    }
    return absl::InternalError("unknown call");
  }

  // Pairs self-sends with self-receives in order (they are copies).
  absl::Status MatchSelf() {
    if (self_sends_.size() != self_recvs_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", comm_.rank, " posted ", self_sends_.size(), " ncclSend(s) to itself and ",
          self_recvs_.size(), " ncclRecv(s) from itself in one group"));
    }
    for (size_t i = 0; i < self_sends_.size(); ++i) {
      const Item& s = self_sends_[i];
      const Item& r = self_recvs_[i];
      if (s.count != r.count || s.type != r.type) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mismatched calls: rank ", comm_.rank, " called ",
            DescribeCall({Call::kSendRecv, s.type, s.count, s.root, -1}, true), " and ",
            DescribeCall({Call::kSendRecv, r.type, r.count, r.root, -1}, false)));
      }
      const size_t bytes = s.count * TypeBytes(s.type);
      before_.push_back([=] { std::memmove(r.out, s.send, bytes); });
    }
    return absl::OkStatus();
  }

  std::vector<Transfer>& transfers() { return transfers_; }
  bool has_sends() const {
    for (const Transfer& t : transfers_) {
      if (t.send) return true;
    }
    return false;
  }
  void Before() {
    for (auto& f : before_) f();
  }
  void After() {
    for (auto& f : after_) f();
  }

 private:
  char* Scratch(size_t bytes) {
    scratch_.push_back(std::make_unique<char[]>(bytes == 0 ? 1 : bytes));
    return scratch_.back().get();
  }

  const CommState& comm_;
  std::vector<Transfer> transfers_;
  std::vector<Item> self_sends_;
  std::vector<Item> self_recvs_;
  std::vector<std::function<void()>> before_;
  std::vector<std::function<void()>> after_;
  std::vector<std::unique_ptr<char[]>> scratch_;
};

}  // namespace

const char* OpName(const std::vector<Item>& items) {
  if (items.size() != 1) return "ncclGroup";
  switch (items[0].call) {
    case Call::kSendRecv:
      return items[0].recv ? "ncclRecv" : "ncclSend";
    case Call::kAllReduce:
      return "ncclAllReduce";
    case Call::kAllGather:
      return "ncclAllGather";
    case Call::kReduceScatter:
      return "ncclReduceScatter";
    case Call::kBroadcast:
      return "ncclBroadcast";
  }
  return "nccl";
}

cudaError_t RunOp(const std::shared_ptr<CommState>& comm, const std::vector<Item>& items) {
  if (comm->aborted.load()) return cudaSuccess;
  std::lock_guard<std::mutex> lock(comm->op_mu);
  if (comm->aborted.load()) return cudaSuccess;
  if (comm->async.load(std::memory_order_acquire) != ncclSuccess) {
    // A communicator that failed (or never became ready) runs nothing more.
    comm->WaitUntilAborted();
    return cudaSuccess;
  }
  const uint64_t ordinal = ++comm->ops_run;
  const std::string what = absl::StrCat("operation #", ordinal, " (", OpName(items), ")");
  if (comm->faults.error_at_op == static_cast<int64_t>(ordinal)) {
    comm->Fail(ncclSystemError, absl::StrCat(what, ": injected fault error@", ordinal));
    comm->WaitUntilAborted();
    return cudaSuccess;
  }
  Plan plan(*comm);
  absl::Status status;
  for (const Item& item : items) {
    if (status.ok()) status = plan.Add(item);
  }
  if (status.ok()) status = plan.MatchSelf();
  if (status.ok()) {
    const bool kill = comm->faults.kill_at_op == static_cast<int64_t>(ordinal);
    if (kill && !plan.has_sends()) raise(SIGKILL);  // injected: killed mid-operation
    plan.Before();
    status = RunTransfers(*comm, ordinal, plan.transfers(), kill);
  }
  if (absl::IsCancelled(status)) return cudaSuccess;
  if (!status.ok()) {
    comm->Fail(ResultOf(status), absl::StrCat(what, ": ", status.message()));
    comm->WaitUntilAborted();
    return cudaSuccess;
  }
  plan.After();
  return cudaSuccess;
}

}  // namespace lockstep::cuda_cpu::nccl

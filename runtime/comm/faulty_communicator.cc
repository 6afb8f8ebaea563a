#include "runtime/comm/faulty_communicator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace lockstep::comm {
namespace {

FaultRule MakeRule(int rank, std::string tag, int64_t occurrence, FaultRule::Action action) {
  FaultRule rule;
  rule.rank = rank;
  rule.tag = std::move(tag);
  rule.occurrence = occurrence;
  rule.action = action;
  return rule;
}

}  // namespace

FaultRule FaultRule::Fail(int rank, std::string tag, int64_t occurrence, absl::Status status) {
  FaultRule rule = MakeRule(rank, std::move(tag), occurrence, Action::kFail);
  rule.status = std::move(status);
  return rule;
}

FaultRule FaultRule::Delay(int rank, std::string tag, int64_t occurrence, absl::Duration delay) {
  FaultRule rule = MakeRule(rank, std::move(tag), occurrence, Action::kDelay);
  rule.delay = delay;
  return rule;
}

FaultRule FaultRule::Mutate(int rank, std::string tag, int64_t occurrence,
                            std::function<void(absl::Span<int64_t>)> mutate) {
  FaultRule rule = MakeRule(rank, std::move(tag), occurrence, Action::kMutate);
  rule.mutate = std::move(mutate);
  return rule;
}

FaultyCommunicator::FaultyCommunicator(Communicator* inner, std::vector<FaultRule> rules,
                                       Clock* clock)
    : inner_(inner), clock_(clock), rules_(std::move(rules)) {}

void FaultyCommunicator::AddRule(FaultRule rule) {
  absl::MutexLock lock(&mu_);
  rules_.push_back(std::move(rule));
}

int64_t FaultyCommunicator::CallCount(absl::string_view tag) const {
  absl::MutexLock lock(&mu_);
  auto it = counters_.find(tag);
  return it == counters_.end() ? 0 : it->second.calls;
}

int64_t FaultyCommunicator::InjectedCount(absl::string_view tag) const {
  absl::MutexLock lock(&mu_);
  auto it = counters_.find(tag);
  return it == counters_.end() ? 0 : it->second.injected;
}

absl::Status FaultyCommunicator::Before(CollectiveOp op, absl::string_view tag,
                                        absl::Span<int64_t> ints) {
  RETURN_IF_ERROR(broken_.CheckUsable(absl::StrCat("communicator of rank ", rank())));
  // Matching actions are copied out so that none runs under the lock.
  absl::Duration delay;
  std::vector<std::function<void(absl::Span<int64_t>)>> mutations;
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    TagCounters& counters = counters_[tag];
    const int64_t occurrence = counters.calls++;
    for (const FaultRule& rule : rules_) {
      if ((rule.rank != FaultRule::kAnyRank && rule.rank != rank()) || rule.tag != tag ||
          (rule.occurrence != FaultRule::kEveryOccurrence && rule.occurrence != occurrence)) {
        continue;
      }
      ++counters.injected;
      switch (rule.action) {
        case FaultRule::Action::kDelay:
          delay += rule.delay;
          break;
        case FaultRule::Action::kMutate:
          mutations.push_back(rule.mutate);
          break;
        case FaultRule::Action::kFail:
          if (failure.ok()) {
            failure = rule.status.ok() ? absl::InternalError("injected fault (OK status given)")
                                       : rule.status;
          }
          break;
      }
    }
  }
  if (delay > absl::ZeroDuration()) clock_->SleepUntil(clock_->Now() + delay);
  for (const auto& mutate : mutations) {
    if (mutate && !ints.empty()) mutate(ints);
  }
  if (!failure.ok()) {
    broken_.Record(failure);
    return absl::Status(failure.code(), absl::StrCat("injected into ", DescribeCall(op, tag),
                                                     " on rank ", rank(), ": ", failure.message()));
  }
  return absl::OkStatus();
}

absl::Status FaultyCommunicator::After(absl::Status status) {
  broken_.Record(status);
  return status;
}

absl::Status FaultyCommunicator::AllReduce(absl::Span<int64_t> data, ReduceOp op,
                                           const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kAllReduce, options.tag, data));
  return After(inner_->AllReduce(data, op, options));
}

absl::Status FaultyCommunicator::AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                                           const CallOptions& options) {
  std::vector<int64_t> input(in.begin(), in.end());
  RETURN_IF_ERROR(Before(CollectiveOp::kAllGather, options.tag, absl::MakeSpan(input)));
  return After(inner_->AllGather(input, out, options));
}

absl::StatusOr<std::vector<std::string>> FaultyCommunicator::AllGatherBytes(
    absl::string_view data, const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kAllGatherBytes, options.tag, {}));
  return After(inner_->AllGatherBytes(data, options));
}

absl::Status FaultyCommunicator::Broadcast(std::string* data, int root,
                                           const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kBroadcast, options.tag, {}));
  return After(inner_->Broadcast(data, root, options));
}

absl::StatusOr<std::vector<std::string>> FaultyCommunicator::Gather(absl::string_view data,
                                                                    int root,
                                                                    const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kGather, options.tag, {}));
  return After(inner_->Gather(data, root, options));
}

absl::Status FaultyCommunicator::AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                                          const CallOptions& options) {
  std::vector<int64_t> input(send.begin(), send.end());
  RETURN_IF_ERROR(Before(CollectiveOp::kAllToAll, options.tag, absl::MakeSpan(input)));
  return After(inner_->AllToAll(input, recv, options));
}

absl::Status FaultyCommunicator::AllToAllV(absl::Span<const float> send,
                                           absl::Span<const int64_t> send_counts,
                                           absl::Span<float> recv,
                                           absl::Span<const int64_t> recv_counts,
                                           const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kAllToAllV, options.tag, {}));
  return After(inner_->AllToAllV(send, send_counts, recv, recv_counts, options));
}

absl::StatusOr<std::vector<std::string>> FaultyCommunicator::AllToAllBytes(
    const std::vector<std::string>& send, const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kAllToAllBytes, options.tag, {}));
  return After(inner_->AllToAllBytes(send, options));
}

absl::Status FaultyCommunicator::Barrier(const CallOptions& options) {
  RETURN_IF_ERROR(Before(CollectiveOp::kBarrier, options.tag, {}));
  return After(inner_->Barrier(options));
}

}  // namespace lockstep::comm

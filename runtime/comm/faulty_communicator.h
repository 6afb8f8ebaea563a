// FaultyCommunicator: wraps another Communicator (not owned) and injects faults at the
// k-th call with a given tag on a given rank, in the style of leveldb's
// FaultInjectionTestEnv. Used by executor and simulation tests to veto a step, to fail
// a rank's collective (its peers then time out or see a desync, which is the point),
// or to make a rank late.
//
//   FaultyCommunicator faulty(inner.get(), {
//       FaultRule::Mutate(/*rank=*/2, "vote", /*occurrence=*/7,
//                         [](absl::Span<int64_t> vote) { vote[0] = 0; }),
//   });
//
// Actions, applied in this order when several rules match one call:
//  * delay: sleeps `delay` on the injected Clock before the inner call;
//  * mutate: applied to the int64 input of AllReduce, AllGather or AllToAll before the
//    inner call (the caller's AllReduce buffer is the input; AllGather and AllToAll
//    inputs are copied first); on other operations it does nothing;
//  * fail: returns `status` without calling the inner operation.
// Like every Communicator, after any error (injected or not) later calls fail with
// FailedPrecondition.
//
// Thread safety: the Communicator methods are called by one thread at a time; AddRule()
// and the counters may be used from any thread.
#ifndef LOCKSTEP_RUNTIME_COMM_FAULTY_COMMUNICATOR_H_
#define LOCKSTEP_RUNTIME_COMM_FAULTY_COMMUNICATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "runtime/comm/collective_op.h"
#include "runtime/comm/collective_protocol.h"
#include "runtime/comm/communicator.h"

namespace lockstep::comm {

struct FaultRule {
  enum class Action { kFail, kDelay, kMutate };
  static constexpr int kAnyRank = -1;
  static constexpr int64_t kEveryOccurrence = -1;

  static FaultRule Fail(int rank, std::string tag, int64_t occurrence, absl::Status status);
  static FaultRule Delay(int rank, std::string tag, int64_t occurrence, absl::Duration delay);
  static FaultRule Mutate(int rank, std::string tag, int64_t occurrence,
                          std::function<void(absl::Span<int64_t>)> mutate);

  int rank = kAnyRank;  // The wrapped communicator's rank, or kAnyRank.
  std::string tag;
  // 0-based index among this rank's calls with `tag` (any operation), or
  // kEveryOccurrence.
  int64_t occurrence = 0;
  Action action = Action::kFail;
  absl::Status status;                              // kFail; must not be OK.
  absl::Duration delay;                             // kDelay.
  std::function<void(absl::Span<int64_t>)> mutate;  // kMutate.
};

class FaultyCommunicator final : public Communicator {
 public:
  // `inner` and `clock` must outlive this object.
  FaultyCommunicator(Communicator* inner, std::vector<FaultRule> rules,
                     Clock* clock = SystemClock::Get());

  void AddRule(FaultRule rule) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls made with `tag` so far (injected failures included).
  int64_t CallCount(absl::string_view tag) const ABSL_LOCKS_EXCLUDED(mu_);
  // Rules that fired on calls with `tag` so far (each matching rule counts once per call).
  int64_t InjectedCount(absl::string_view tag) const ABSL_LOCKS_EXCLUDED(mu_);

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }

  absl::Status AllReduce(absl::Span<int64_t> data, ReduceOp op,
                         const CallOptions& options) override;
  absl::Status AllGather(absl::Span<const int64_t> in, absl::Span<int64_t> out,
                         const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> AllGatherBytes(absl::string_view data,
                                                          const CallOptions& options) override;
  absl::Status Broadcast(std::string* data, int root, const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> Gather(absl::string_view data, int root,
                                                  const CallOptions& options) override;
  absl::Status AllToAll(absl::Span<const int64_t> send, absl::Span<int64_t> recv,
                        const CallOptions& options) override;
  absl::Status AllToAllV(absl::Span<const float> send, absl::Span<const int64_t> send_counts,
                         absl::Span<float> recv, absl::Span<const int64_t> recv_counts,
                         const CallOptions& options) override;
  absl::StatusOr<std::vector<std::string>> AllToAllBytes(const std::vector<std::string>& send,
                                                         const CallOptions& options) override;
  absl::Status Barrier(const CallOptions& options) override;

 private:
  struct TagCounters {
    int64_t calls = 0;
    int64_t injected = 0;
  };

  // Counts the call, sleeps for matching delays, applies matching mutations to `ints`
  // (may be empty) and returns the status of a matching fail rule, or OK.
  absl::Status Before(CollectiveOp op, absl::string_view tag, absl::Span<int64_t> ints)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records a non-OK `status` as the first error.
  absl::Status After(absl::Status status);
  template <typename T>
  absl::StatusOr<T> After(absl::StatusOr<T> result) {
    if (!result.ok()) After(result.status()).IgnoreError();
    return result;
  }

  Communicator* const inner_;
  Clock* const clock_;
  FirstError broken_;  // First error returned; touched only by the calling thread.
  mutable absl::Mutex mu_;
  std::vector<FaultRule> rules_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, TagCounters> counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::comm

#endif  // LOCKSTEP_RUNTIME_COMM_FAULTY_COMMUNICATOR_H_

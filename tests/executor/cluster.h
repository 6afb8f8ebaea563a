// ScriptedCluster: N executors of one instance in one process, stepped in lockstep by
// a test: each StepAll() runs one real Executor::Step() on every rank (one thread per
// rank, joined before it returns), so the test can inspect every rank between steps.
// The ranks are built by sim::RankStacks (InProcessCommunicator, FakeEngine inline,
// FakeTransceiver, a FakeClock per rank advanced by the same step time).
#ifndef LOCKSTEP_TESTS_EXECUTOR_CLUSTER_H_
#define LOCKSTEP_TESTS_EXECUTOR_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "runtime/comm/faulty_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/sim/rank_stack.h"
#include "runtime/transfer/fake_transceiver.h"

namespace lockstep::testing {

struct ClusterOptions {
  int ranks = 4;
  sched::InstanceRole role = sched::InstanceRole::kAggregated;
  sched::SchedulerConfig scheduler;
  kv::DraftMode draft_mode = kv::DraftMode::kNone;
  int32_t tokens_per_block = 4;
  int32_t num_blocks = 64;
  int32_t draft_num_blocks = 0;  // the draft pool's blocks (0: num_blocks)
  int32_t host_tier_blocks = 0;  // a host KV tier below the target pool (0: none)
  double draft_acceptance = 0.5;
  absl::Duration step_time = absl::Milliseconds(1);
  absl::Duration transfer_latency = absl::Milliseconds(5);  // fixed
  // Per-rank override of transfer_latency (empty: none).
  std::vector<absl::Duration> rank_transfer_latency;
  absl::Duration transfer_deadline = absl::Seconds(10);
  double transfer_failure_rate = 0.0;
  // The transceiver refuses these sends (FakeTransceiverOptions::refuse_send).
  std::function<bool(RequestId)> refuse_send;
  bool with_transceiver = true;  // false: the executors get none
  absl::Duration collective_timeout = absl::Seconds(30);
  absl::Duration drain_timeout = absl::Seconds(120);
  std::vector<comm::FaultRule> faults;
  // KV events on every rank (ExecutorConfig::kv_events), delivered to this sink on the
  // leader (not owned).
  bool kv_events = false;
  kv::KvEventSink* kv_event_sink = nullptr;
  // The engine of `rank` fails the batches this selects (Collect returns Internal).
  std::function<bool(int rank, const engine::Batch& batch)> fail_batch;
};

// The leader's view of one request's responses.
struct Stream {
  std::vector<int32_t> tokens;
  bool finished = false;
  sched::FinishReason reason = sched::FinishReason::kNone;
  absl::Status status;
  bool kv_pull_failed = false;  // the final response's
  std::optional<sched::ContextSource> context;
  int64_t cached_prompt_tokens = 0;  // the last response's
  int num_finished = 0;              // final responses received (exactly one when all is well)
};

class ScriptedCluster : public exec::ResponseSink {
 public:
  explicit ScriptedCluster(const ClusterOptions& options);
  ~ScriptedCluster() override;

  // One step on every rank. Returns the first rank error, if any.
  absl::Status StepAll();
  // Steps until `done()` or `max_steps`; false if it never became true.
  template <typename Done>
  bool StepUntil(Done done, int max_steps) {
    for (int i = 0; i < max_steps; ++i) {
      if (done()) return true;
      if (!StepAll().ok()) return false;
    }
    return done();
  }

  // A request for the leader's inbox. Generation-only requests get a context source
  // whose first token/drafts match the fake engine.
  exec::NewRequestSpec MakeRequest(int64_t id, int prompt_len, int max_tokens,
                                   std::optional<int> pinned_rank = std::nullopt) const;
  void Submit(exec::NewRequestSpec spec);
  void Cancel(RequestId id) { rank(0).inbox().Cancel(id); }

  exec::Executor& rank(int r) { return *stacks_->rank(r).executor; }
  const engine::FakeEngine& engine(int r) const { return *stacks_->rank(r).engine; }
  const transfer::FakeTransceiver& transceiver(int r) const {
    return *stacks_->rank(r).transceiver;
  }
  // Each rank's own clock; a test may advance one to make the ranks' clocks disagree.
  FakeClock& clock(int r) { return *stacks_->rank(r).clock; }
  int ranks() const { return options_.ranks; }
  int64_t steps() const { return steps_; }

  // Audit of every rank (each line prefixed by the rank).
  std::vector<std::string> AuditAll() const;
  bool AllFinished(int64_t expected) const;
  Stream stream(RequestId id) const;
  // The tokens the fake engine defines for a request (what greedy decoding must give).
  std::vector<int32_t> ExpectedTokens(const exec::NewRequestSpec& spec) const;

  void OnResponses(std::vector<exec::Response> responses) override;

 private:
  ClusterOptions options_;
  std::unique_ptr<sim::RankStacks> stacks_;
  int64_t steps_ = 0;

  // One persistent thread per rank (the executor thread that owns that rank's state).
  void RankLoop(int rank);
  std::vector<std::thread> threads_;
  absl::Mutex step_mu_;
  int64_t step_target_ ABSL_GUARDED_BY(step_mu_) = 0;
  std::vector<int64_t> steps_done_ ABSL_GUARDED_BY(step_mu_);
  std::vector<absl::Status> step_results_ ABSL_GUARDED_BY(step_mu_);
  bool stop_ ABSL_GUARDED_BY(step_mu_) = false;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<RequestId, Stream> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::testing

#endif  // LOCKSTEP_TESTS_EXECUTOR_CLUSTER_H_

#include "runtime/sim/sim_fleet.h"

#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "runtime/comm/faulty_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/sim/rank_stack.h"
#include "runtime/sim/sim_instance.h"
#include "runtime/sim/workload.h"
#include "scheduler/continuation.h"

namespace lockstep::sim {
namespace {

constexpr char kInjected[] = "injected instance failure";

// Holds the leader's responses until the router's next tick.
class BufferingSink : public exec::ResponseSink {
 public:
  void OnResponses(std::vector<exec::Response> responses) override {
    absl::MutexLock lock(&mu_);
    for (exec::Response& r : responses) buffered_.push_back(std::move(r));
  }
  std::vector<exec::Response> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(buffered_, {});
  }

 private:
  absl::Mutex mu_;
  std::vector<exec::Response> buffered_ ABSL_GUARDED_BY(mu_);
};

// What the router knows of one workload request.
struct Tracked {
  const SimRequest* request = nullptr;
  std::vector<int32_t> delivered;  // over all its attempts
  RequestId attempt;               // the attempt running now
  int instance = -1;               // where it runs
  int migrations = 0;
  int64_t cancel_step = -1;  // the fleet step its client cancels at (-1: never)
  bool cancel_sent = false;
  bool done = false;
  sched::FinishReason reason = sched::FinishReason::kNone;
  absl::Status status;
};

// Written by the rank's thread before it arrives at the barrier; read by the router in
// the barrier's completion (the barrier orders the two).
struct RankState {
  bool stopped = false;  // failed or drained: it steps no more
  absl::Status failure;
};

struct Instance {
  BufferingSink sink;
  std::unique_ptr<RankStacks> stacks;
  std::vector<RankState> ranks;
  bool dead = false;
  bool drain_sent = false;
  int in_flight = 0;
};

class Fleet {
 public:
  explicit Fleet(const FleetConfig& config)
      : config_(config),
        reference_(SimEngineOptions(config.sim)),
        workload_(GenerateWorkload(config.sim.workload, config.sim.seed, config.sim.ranks,
                                   config.sim.scheduler.speculative.num_draft_tokens, reference_)),
        next_id_(static_cast<int64_t>(workload_.size())) {
    summary_.requests = static_cast<int64_t>(workload_.size());
    for (const SimRequest& r : workload_) tracked_.push_back(Tracked{.request = &r});
  }

  FleetSummary Run() {
    if (!Build()) return summary_;
    const int total = config_.instances * config_.sim.ranks;
    std::barrier<TickFn> sync(total, TickFn{this});
    barrier_ = &sync;
    std::vector<std::thread> threads;
    for (int i = 0; i < config_.instances; ++i) {
      for (int r = 0; r < config_.sim.ranks; ++r) threads.emplace_back([this, i, r] { Ranks(i, r); });
    }
    for (std::thread& t : threads) t.join();
    Summarize();
    return summary_;
  }

 private:
  // The barrier's completion: the router's tick.
  struct TickFn {
    Fleet* fleet;
    void operator()() noexcept { fleet->Tick(); }
  };

  bool Build();
  void Ranks(int i, int r);
  // Between two steps, on one thread while every rank waits.
  void Tick();
  void TakeResponses(int i);
  void HandleFailure(int i);
  void Migrate(Tracked& t);
  void Submit(size_t index, exec::NewRequestSpec spec);
  // The live instance with the fewest requests in flight; -1 when none lives.
  int PickInstance() const;
  void Summarize();
  void CheckTokens(const Tracked& t);
  void Violation(const std::string& what) ABSL_LOCKS_EXCLUDED(violations_mu_) {
    absl::MutexLock lock(&violations_mu_);
    if (summary_.violations.size() < 20) {
      summary_.violations.push_back(
          absl::StrCat("seed ", config_.sim.seed, " step ", step_.load(), " ", what));
    }
  }

  const FleetConfig& config_;
  const engine::FakeEngine reference_;
  const std::vector<SimRequest> workload_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<Tracked> tracked_;                       // by workload index
  absl::flat_hash_map<RequestId, size_t> by_attempt_;  // attempt id -> workload index
  size_t next_arrival_ = 0;
  int64_t next_id_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> done_{false};
  std::barrier<TickFn>* barrier_ = nullptr;
  FleetSummary summary_;
  absl::Mutex violations_mu_;
};

bool Fleet::Build() {
  if (config_.sim.role != sched::InstanceRole::kAggregated || config_.instances < 1) {
    Violation("the fleet runs one or more aggregated instances");
    return false;
  }
  for (int i = 0; i < config_.instances; ++i) {
    auto instance = std::make_unique<Instance>();
    std::vector<comm::FaultRule> failures;
    for (const InstanceFailure& f : config_.failures) {
      if (f.instance != i) continue;
      for (int r = 0; r < config_.sim.ranks; ++r) {
        failures.push_back(
            comm::FaultRule::Fail(r, "vote", f.step, absl::UnavailableError(kInjected)));
      }
    }
    absl::StatusOr<std::unique_ptr<RankStacks>> stacks = RankStacks::Build(SimRankStackOptions(
        config_.sim, absl::StrCat("sim", i), &instance->sink, std::move(failures)));
    if (!stacks.ok()) {
      Violation(absl::StrCat("instance ", i, ": ", stacks.status().message()));
      return false;
    }
    instance->stacks = *std::move(stacks);
    instance->ranks.resize(config_.sim.ranks);
    instances_.push_back(std::move(instance));
  }
  return true;
}

void Fleet::Ranks(int i, int r) {
  RankState& state = instances_[i]->ranks[r];
  RankStack& rank = instances_[i]->stacks->rank(r);
  while (true) {
    barrier_->arrive_and_wait();  // the router's tick ran
    if (done_.load()) return;
    if (state.stopped) continue;
    rank.clock->Advance(config_.sim.step_time);
    if (absl::Status s = rank.executor->Step(); !s.ok()) {
      state.stopped = true;
      state.failure = std::move(s);
      continue;
    }
    if (config_.sim.audit) {
      for (const std::string& v : rank.executor->Audit()) {
        Violation(absl::StrCat("instance ", i, " rank ", r, ": audit: ", v));
      }
    }
    if (rank.executor->drained()) state.stopped = true;
  }
}

void Fleet::Tick() {
  for (int i = 0; i < config_.instances; ++i) TakeResponses(i);
  for (int i = 0; i < config_.instances; ++i) HandleFailure(i);
  const int64_t step = step_.load();
  const absl::Duration elapsed = config_.sim.step_time * step;
  while (next_arrival_ < workload_.size() && workload_[next_arrival_].arrival <= elapsed) {
    const size_t index = next_arrival_++;
    Tracked& t = tracked_[index];
    if (t.request->cancel_after_steps >= 0) t.cancel_step = step + t.request->cancel_after_steps;
    if (PickInstance() < 0) {
      t.done = true;
      t.reason = sched::FinishReason::kError;
      t.status = absl::UnavailableError("no live instance");
      continue;
    }
    Submit(index, t.request->spec);
  }
  // Cancels; every request that has arrived ended: the fleet may drain.
  bool settled = next_arrival_ == workload_.size();
  for (size_t k = 0; k < next_arrival_; ++k) {
    Tracked& t = tracked_[k];
    if (t.done) continue;
    settled = false;
    if (t.cancel_step >= 0 && !t.cancel_sent && step >= t.cancel_step) {
      instances_[t.instance]->stacks->rank(0).executor->inbox().Cancel(t.attempt);
      t.cancel_sent = true;
    }
  }
  bool all_stopped = true;
  for (auto& instance : instances_) {
    if (instance->dead) continue;
    if (settled && !instance->drain_sent) {
      instance->stacks->rank(0).executor->inbox().Drain();
      instance->drain_sent = true;
    }
    for (const RankState& rank : instance->ranks) all_stopped = all_stopped && rank.stopped;
  }
  if (all_stopped) {
    done_ = true;
  } else if (step >= config_.sim.max_steps) {
    Violation("the fleet did not finish within max_steps");
    done_ = true;
  }
  step_ = step + 1;
}

void Fleet::TakeResponses(int i) {
  for (exec::Response& r : instances_[i]->sink.Take()) {
    auto it = by_attempt_.find(r.id);
    if (it == by_attempt_.end()) {
      Violation(absl::StrCat("instance ", i, " answered request ", r.id.value(), ", never sent"));
      continue;
    }
    Tracked& t = tracked_[it->second];
    const int64_t id = t.request->spec.id.value();
    if (t.done || t.attempt != r.id || t.instance != i) {
      Violation(absl::StrCat("instance ", i, " answered attempt ", r.id.value(), " of request ",
                             id, ", which does not run there (any more)"));
      continue;
    }
    t.delivered.insert(t.delivered.end(), r.tokens.begin(), r.tokens.end());
    if (!r.finished) continue;
    --instances_[i]->in_flight;
    t.done = true;
    t.reason = r.finish_reason;
    t.status = r.status;
    if (r.finish_reason == sched::FinishReason::kCancelled && !t.cancel_sent) {
      Violation(absl::StrCat("request ", id, " was cancelled, but its client never cancelled it: ",
                             r.status.ToString()));
    } else if (r.finish_reason == sched::FinishReason::kError) {
      Violation(absl::StrCat("request ", id, " failed on live instance ", i, ": ",
                             r.status.ToString()));
    }
  }
}

void Fleet::HandleFailure(int i) {
  Instance& instance = *instances_[i];
  if (instance.dead) return;
  int failed = 0;
  for (const RankState& rank : instance.ranks) failed += !rank.failure.ok();
  if (failed == 0) return;
  instance.dead = true;
  ++summary_.failed_instances;
  for (size_t r = 0; r < instance.ranks.size(); ++r) {
    const absl::Status& why = instance.ranks[r].failure;
    if (failed != static_cast<int>(instance.ranks.size()) ||
        !absl::StrContains(why.message(), kInjected)) {
      Violation(absl::StrCat("instance ", i, " rank ", r, " stopped: ", why.ToString()));
    }
  }
  for (Tracked& t : tracked_) {
    if (!t.done && t.instance == i) Migrate(t);
  }
}

void Fleet::Migrate(Tracked& t) {
  auto end = [&t](sched::FinishReason reason, absl::Status status) {
    t.done = true;
    t.reason = reason;
    t.status = std::move(status);
  };
  // A client cancel is never migrated; nor is a request past the limit or without a
  // live instance to go to.
  if (t.cancel_sent) {
    return end(sched::FinishReason::kCancelled, absl::CancelledError("cancelled by its client"));
  }
  if (t.migrations >= config_.migration_limit) {
    return end(sched::FinishReason::kError, absl::UnavailableError("the migration limit"));
  }
  if (PickInstance() < 0) {
    return end(sched::FinishReason::kError, absl::UnavailableError("no live instance"));
  }
  const exec::NewRequestSpec& original = t.request->spec;
  const sched::Continuation next =
      sched::ContinueAfter(original.prompt, original.sampling, t.delivered);
  exec::NewRequestSpec spec = original;
  spec.id = RequestId(++next_id_);
  spec.prompt = next.prompt;
  spec.sampling = next.sampling;
  ++t.migrations;
  ++summary_.migrations;
  if (!t.delivered.empty()) ++summary_.migrated_mid_stream;
  Submit(static_cast<size_t>(&t - tracked_.data()), std::move(spec));
}

void Fleet::Submit(size_t index, exec::NewRequestSpec spec) {
  const int i = PickInstance();
  Tracked& t = tracked_[index];
  Instance& instance = *instances_[i];
  spec.arrival = instance.stacks->rank(0).clock->Now();
  t.attempt = spec.id;
  t.instance = i;
  by_attempt_[spec.id] = index;
  ++instance.in_flight;
  instance.stacks->rank(0).executor->inbox().Push(std::move(spec));
}

int Fleet::PickInstance() const {
  int best = -1;
  for (int i = 0; i < config_.instances; ++i) {
    const Instance& instance = *instances_[i];
    if (instance.dead || instance.drain_sent) continue;
    if (best < 0 || instance.in_flight < instances_[best]->in_flight) best = i;
  }
  return best;
}

void Fleet::Summarize() {
  summary_.steps = step_.load();
  for (int i = 0; i < config_.instances; ++i) {
    const Instance& instance = *instances_[i];
    if (instance.dead) continue;
    for (int r = 0; r < instance.stacks->size(); ++r) {
      const exec::Executor& e = *instance.stacks->rank(r).executor;
      for (const std::string& problem : PoolsNotAtBaseline(e)) {
        Violation(absl::StrCat("instance ", i, " rank ", r, ": ", problem));
      }
      if (e.counters().audit_violations > 0) {
        Violation(absl::StrCat("instance ", i, " rank ", r, ": ", e.counters().audit_violations,
                               " audit violations or failed KV updates counted by the executor"));
      }
    }
  }
  for (const Tracked& t : tracked_) {
    const int64_t id = t.request->spec.id.value();
    summary_.outputs[id] = t.delivered;
    if (!t.done) {
      Violation(absl::StrCat("request ", id, " never finished"));
    } else if (t.reason == sched::FinishReason::kCancelled) {
      ++summary_.cancelled;
    } else if (t.reason == sched::FinishReason::kError) {
      ++summary_.failed;
      if (summary_.failed_instances == 0) {
        Violation(absl::StrCat("request ", id, " failed, and no instance did"));
      }
    } else {
      ++summary_.completed;
      if (t.migrations > 0) ++summary_.migrated_completed;
      CheckTokens(t);
    }
  }
}

// The output over all attempts is the token function's for the original request.
void Fleet::CheckTokens(const Tracked& t) {
  const exec::NewRequestSpec& spec = t.request->spec;
  const int64_t id = spec.id.value();
  const int64_t prompt = static_cast<int64_t>(spec.prompt.size());
  if (static_cast<int64_t>(t.delivered.size()) != spec.sampling.max_tokens) {
    Violation(absl::StrCat("request ", id, " got ", t.delivered.size(), " tokens over ",
                           t.migrations + 1, " attempts, expected ", spec.sampling.max_tokens));
    return;
  }
  for (int64_t k = 0; k < spec.sampling.max_tokens; ++k) {
    const int32_t want = reference_.TargetToken(spec.sampling.seed, prompt + k);
    if (t.delivered[k] != want) {
      Violation(absl::StrCat("request ", id, " token ", k, " is ", t.delivered[k], ", expected ",
                             want, " (", t.migrations, " migrations)"));
      return;
    }
  }
}

}  // namespace

std::string FleetConfig::ToString() const {
  std::string out = absl::StrCat(sim.ToString(), " instances=", instances,
                                 " migration_limit=", migration_limit, " failures=[");
  for (const InstanceFailure& f : failures) {
    absl::StrAppend(&out, &f == &failures.front() ? "" : " ", "instance ", f.instance, " at step ",
                    f.step);
  }
  return out + "]";
}

std::string FleetSummary::ToString() const {
  std::string out = absl::StrFormat(
      "requests %d: completed %d, failed %d, cancelled %d | instances failed %d | migrations "
      "%d (%d in mid-stream), migrated requests completed %d | steps %d",
      requests, completed, failed, cancelled, failed_instances, migrations, migrated_mid_stream,
      migrated_completed, steps);
  for (const std::string& v : violations) absl::StrAppend(&out, "\n  VIOLATION: ", v);
  return out;
}

FleetSummary RunFleet(const FleetConfig& config) { return Fleet(config).Run(); }

}  // namespace lockstep::sim

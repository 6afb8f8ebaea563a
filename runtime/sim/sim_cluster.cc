#include "runtime/sim/sim_cluster.h"

#include <memory>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/sim/rank_stack.h"
#include "runtime/sim/sim_instance.h"
#include "runtime/transfer/fake_transceiver.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sim {
namespace {

// What the leader's sink saw of one request.
struct Outcome {
  std::vector<int32_t> tokens;
  bool handed_off = false;  // a context-only leg handed off its KV
  int answers = 0;          // final responses and hand-offs: exactly one when all is well
  sched::FinishReason reason = sched::FinishReason::kNone;
  absl::Status status;
  int64_t step = 0;  // step and rank of the last answer
  int32_t rank = 0;
};

class CollectingSink : public exec::ResponseSink {
 public:
  void OnResponses(std::vector<exec::Response> responses) override {
    absl::MutexLock lock(&mu_);
    for (exec::Response& r : responses) {
      Outcome& o = outcomes_[r.id];
      o.tokens.insert(o.tokens.end(), r.tokens.begin(), r.tokens.end());
      if (!r.finished && !r.context.has_value()) continue;
      if (o.answers++ == 0) ++finished_;  // the leg ended
      o.step = r.step;
      o.rank = r.rank;
      o.handed_off = o.handed_off || (r.context.has_value() && !r.finished);
      if (r.finished) {
        o.reason = r.finish_reason;
        o.status = r.status;
      }
    }
  }
  // Requests whose leg ended (a final response or a KV hand-off).
  int64_t finished() const {
    absl::MutexLock lock(&mu_);
    return finished_;
  }
  // The rank that answered `id`'s leg, once it ended.
  std::optional<int32_t> AnsweredBy(RequestId id) const {
    absl::MutexLock lock(&mu_);
    auto it = outcomes_.find(id);
    if (it == outcomes_.end() || it->second.answers == 0) return std::nullopt;
    return it->second.rank;
  }
  absl::flat_hash_map<RequestId, Outcome> outcomes() const {
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RequestId, Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
};

// One run: Build the ranks, Drive them until they drain, then Summarize.
class Simulation {
 public:
  explicit Simulation(const SimConfig& config)
      : config_(config),
        reference_(SimEngineOptions(config)),
        workload_(GenerateWorkload(config.workload, config.seed, config.ranks,
                                   config.scheduler.speculative.num_draft_tokens, reference_)) {
    summary_.requests = static_cast<int64_t>(workload_.size());
    for (size_t i = 0; i < workload_.size(); ++i) {
      (workload_[i].follows < 0 ? starts_ : followups_).push_back(i);
    }
  }

  SimSummary Run() {
    if (!Build()) return summary_;
    Drive();
    Summarize();
    return summary_;
  }

 private:
  // The leader's side of the client: what has arrived, the cancels it owes.
  struct ClientState {
    size_t next_arrival = 0;  // into starts_
    // Follow-ups not sent yet (indices into workload_), and when each may go (-1: its
    // previous turn is not answered yet).
    std::vector<size_t> waiting;
    std::vector<int64_t> send_at;
    size_t sent = 0;
    std::vector<std::pair<int64_t, RequestId>> cancels;  // (step, id)
    bool drain_sent = false;
  };

  bool Build();
  void Drive();
  void RunRank(int r);
  void FeedLeader(int64_t step, exec::Executor& leader, ClientState& client);
  void Send(int64_t step, const SimRequest& req, exec::Executor& leader, ClientState& client);
  void Summarize();
  void CountRank(int r);
  // Which requests had a fault injected, by kind.
  absl::flat_hash_set<std::pair<RequestId, transfer::InjectedFault::Kind>> InjectedFaults();
  void CheckOutcome(
      const SimRequest& req, const absl::flat_hash_map<RequestId, Outcome>& outcomes,
      const absl::flat_hash_set<std::pair<RequestId, transfer::InjectedFault::Kind>>& injected);
  void CheckTokens(const SimRequest& req, const Outcome& o);
  // Folds the request's outcome into summary_.outcome_digest.
  void DigestOutcome(const SimRequest& req,
                     const absl::flat_hash_map<RequestId, Outcome>& outcomes);
  void Violation(int rank, int64_t step, const std::string& what) {
    AddViolation(absl::StrCat("rank ", rank, ": ", what), step);
  }
  void AddViolation(const std::string& what, int64_t step) {
    absl::MutexLock lock(&violations_mu_);
    if (summary_.violations.size() < 20) {
      summary_.violations.push_back(absl::StrCat("seed ", config_.seed, " step ", step, " ", what));
    }
  }

  const SimConfig& config_;
  const engine::FakeEngine reference_;
  const std::vector<SimRequest> workload_;
  std::vector<size_t> starts_;     // requests that are not follow-ups, in arrival order
  std::vector<size_t> followups_;  // follow-ups, in workload order
  SimSummary summary_;
  absl::Mutex violations_mu_;
  CollectingSink sink_;
  std::shared_ptr<ExpertExchange> eplb_;  // with config_.eplb; outlives stacks_'s engines
  std::unique_ptr<RankStacks> stacks_;
  absl::Time start_;
};

bool Simulation::Build() {
  RankStackOptions options = SimRankStackOptions(config_, "sim", &sink_);
  eplb_ = ExpertExchange::Attach(config_.eplb, config_.seed, config_.ranks, &options);
  absl::StatusOr<std::unique_ptr<RankStacks>> stacks = RankStacks::Build(options);
  if (!stacks.ok()) {
    AddViolation(std::string(stacks.status().message()), 0);
    return false;
  }
  stacks_ = *std::move(stacks);
  start_ = stacks_->rank(0).clock->Now();
  return true;
}

void Simulation::Drive() {
  std::vector<std::thread> threads;
  for (int r = 0; r < config_.ranks; ++r) threads.emplace_back([this, r] { RunRank(r); });
  for (std::thread& t : threads) t.join();
}

void Simulation::RunRank(int r) {
  exec::Executor& e = *stacks_->rank(r).executor;
  FakeClock& clock = *stacks_->rank(r).clock;
  ClientState client;
  for (int64_t step = 0; step < config_.max_steps; ++step) {
    clock.Advance(config_.step_time);
    if (r == 0) FeedLeader(step, e, client);
    const absl::Status s = e.Step();
    if (!s.ok()) {
      Violation(r, step, absl::StrCat("step failed: ", s.ToString()));
      return;
    }
    if (config_.audit) {
      for (const std::string& v : e.Audit()) Violation(r, step, absl::StrCat("audit: ", v));
    }
    if (e.drained()) return;
  }
  std::string state;
  for (const std::string& line : e.DescribeRequests()) absl::StrAppend(&state, "\n    ", line);
  Violation(r, config_.max_steps, absl::StrCat("did not finish within max_steps:", state));
}

void Simulation::Send(int64_t step, const SimRequest& req, exec::Executor& leader,
                      ClientState& client) {
  exec::NewRequestSpec spec = req.spec;
  spec.arrival = stacks_->rank(0).clock->Now();
  if (req.follows >= 0 && config_.workload.hint_followups) {
    spec.preferred_rank = sink_.AnsweredBy(workload_[req.follows].spec.id);
  }
  leader.inbox().Push(std::move(spec));
  ++client.sent;
  if (req.cancel_after_steps >= 0) {
    client.cancels.emplace_back(step + req.cancel_after_steps, req.spec.id);
  }
}

void Simulation::FeedLeader(int64_t step, exec::Executor& leader, ClientState& client) {
  const absl::Time now = stacks_->rank(0).clock->Now();
  if (step == 0) {
    client.waiting = followups_;
    client.send_at.assign(followups_.size(), -1);
  }
  while (client.next_arrival < starts_.size() &&
         start_ + workload_[starts_[client.next_arrival]].arrival <= now) {
    Send(step, workload_[starts_[client.next_arrival++]], leader, client);
  }
  // Follow-ups go some think steps after their previous turn was answered.
  for (size_t i = 0; i < client.waiting.size();) {
    const SimRequest& req = workload_[client.waiting[i]];
    if (client.send_at[i] < 0 && sink_.AnsweredBy(workload_[req.follows].spec.id)) {
      client.send_at[i] = step + req.think_steps;
    }
    if (client.send_at[i] < 0 || client.send_at[i] > step) {
      ++i;
      continue;
    }
    Send(step, req, leader, client);
    client.waiting.erase(client.waiting.begin() + static_cast<ptrdiff_t>(i));
    client.send_at.erase(client.send_at.begin() + static_cast<ptrdiff_t>(i));
  }
  for (auto it = client.cancels.begin(); it != client.cancels.end();) {
    if (it->first <= step) {
      leader.inbox().Cancel(it->second);
      it = client.cancels.erase(it);
    } else {
      ++it;
    }
  }
  if (!client.drain_sent && client.sent == workload_.size() &&
      sink_.finished() >= static_cast<int64_t>(workload_.size())) {
    leader.inbox().Drain();
    client.drain_sent = true;
  }
}

void Simulation::Summarize() {
  for (int r = 0; r < config_.ranks; ++r) CountRank(r);
  if (summary_.steps > 0) {
    summary_.tokens_per_step =
        static_cast<double>(summary_.generated_tokens) / static_cast<double>(summary_.steps);
    summary_.vetoes_per_1000_steps =
        1000.0 * static_cast<double>(summary_.vetoed_steps) / static_cast<double>(summary_.steps);
  }
  const auto injected = InjectedFaults();
  const auto outcomes = sink_.outcomes();
  for (const SimRequest& req : workload_) {
    CheckOutcome(req, outcomes, injected);
    DigestOutcome(req, outcomes);
  }
  if (eplb_ != nullptr) {
    summary_.eplb = eplb_->Summary();
    for (const std::string& problem : eplb_->Violations()) AddViolation(problem, summary_.steps);
  }
}

// FNV-1a over the outcome's words, in workload order.
void Simulation::DigestOutcome(const SimRequest& req,
                               const absl::flat_hash_map<RequestId, Outcome>& outcomes) {
  auto mix = [this](int64_t word) {
    for (int byte = 0; byte < 8; ++byte) {
      summary_.outcome_digest ^= static_cast<uint64_t>(word >> (8 * byte)) & 0xff;
      summary_.outcome_digest *= 0x100000001b3ULL;
    }
  };
  mix(req.spec.id.value());
  auto it = outcomes.find(req.spec.id);
  if (it == outcomes.end()) {
    mix(-1);
    return;
  }
  const Outcome& o = it->second;
  for (int64_t word : {static_cast<int64_t>(o.reason), int64_t{o.handed_off}, int64_t{o.answers},
                       o.step, int64_t{o.rank}, static_cast<int64_t>(o.tokens.size())}) {
    mix(word);
  }
  for (int32_t token : o.tokens) mix(token);
}

void Simulation::CountRank(int r) {
  const exec::Executor& e = *stacks_->rank(r).executor;
  const exec::ExecutorCounters& c = e.counters();
  if (r == 0) {
    summary_.steps = c.steps;
    summary_.vetoed_steps = c.vetoed_steps;
  }
  summary_.padded_steps += c.padded_steps;
  summary_.dummies_refused += c.dummies_refused;
  summary_.deferred_updates += c.deferred_updates;
  summary_.stale_updates += c.stale_updates;
  summary_.paused += c.paused;
  summary_.no_progress += c.no_progress;
  summary_.generated_tokens += c.generated_tokens;
  summary_.drafts_proposed += c.drafts_proposed;
  summary_.drafts_accepted += c.drafts_accepted;
  for (size_t k = 0; k < c.draft_k_steps.size(); ++k) {
    summary_.draft_k_steps[k] += c.draft_k_steps[k];
  }
  summary_.transfer_failures += c.transfer_failures;
  summary_.context_tokens += c.context_tokens;
  summary_.reused_tokens += c.reused_tokens;
  if (c.audit_violations > 0) {
    Violation(r, c.steps,
              absl::StrCat(c.audit_violations,
                           " audit violations or failed KV updates counted by the executor"));
  }
  // Every pool back to its baseline: only prefix-cache blocks may stay.
  const kv::ManagerStats kv = e.kv().Stats();
  summary_.kv_reused_tokens += kv.reused_tokens;
  summary_.mirror_reused_tokens += kv.mirror_reused_tokens;
  summary_.tier_onboarded_tokens += kv.onboarded_tokens;
  for (const std::string& problem : PoolsNotAtBaseline(e)) Violation(r, c.steps, problem);
}

// A failed receive (generation-only) or a refused send (context-only) explains an
// error; only a client cancel explains a cancellation.
absl::flat_hash_set<std::pair<RequestId, transfer::InjectedFault::Kind>>
Simulation::InjectedFaults() {
  absl::flat_hash_set<std::pair<RequestId, transfer::InjectedFault::Kind>> injected;
  for (int r = 0; r < config_.ranks; ++r) {
    for (const transfer::InjectedFault& f : stacks_->rank(r).transceiver->injected()) {
      injected.insert({f.id, f.kind});
      if (f.kind == transfer::InjectedFault::Kind::kSendRefusal) ++summary_.send_refusals;
      if (f.kind == transfer::InjectedFault::Kind::kTransferFallback) {
        ++summary_.transfer_fallbacks;
      }
    }
  }
  return injected;
}

void Simulation::CheckOutcome(
    const SimRequest& req, const absl::flat_hash_map<RequestId, Outcome>& outcomes,
    const absl::flat_hash_set<std::pair<RequestId, transfer::InjectedFault::Kind>>& injected) {
  const int64_t id = req.spec.id.value();
  auto it = outcomes.find(req.spec.id);
  if (it == outcomes.end() || it->second.answers == 0) {
    Violation(0, summary_.steps, absl::StrCat("request ", id, " never finished"));
    return;
  }
  const Outcome& o = it->second;
  if (o.answers > 1) {
    Violation(o.rank, o.step, absl::StrCat("request ", id, " was answered ", o.answers, " times"));
  }
  if (o.reason == sched::FinishReason::kCancelled) {
    ++summary_.cancelled;
    if (req.cancel_after_steps < 0) {
      Violation(o.rank, o.step,
                absl::StrCat("request ", id, " was cancelled, but the client never cancelled it: ",
                             o.status.ToString()));
    }
    return;
  }
  if (o.reason == sched::FinishReason::kError) {
    ++summary_.failed;
    const auto cause = req.spec.type == sched::RequestType::kContextOnly
                           ? transfer::InjectedFault::Kind::kSendRefusal
                           : transfer::InjectedFault::Kind::kTransferFailure;
    if (!injected.contains({req.spec.id, cause})) {
      Violation(o.rank, o.step,
                absl::StrCat("request ", id, " failed without an injected fault to explain it: ",
                             o.status.ToString()));
    }
    return;
  }
  o.handed_off ? ++summary_.handed_off : ++summary_.completed;
  CheckTokens(req, o);
}

// Generation-only streams omit the first token (the context leg sent it); a
// context-only leg that handed off its KV produced only the first token.
void Simulation::CheckTokens(const SimRequest& req, const Outcome& o) {
  const int64_t id = req.spec.id.value();
  const int64_t prompt = static_cast<int64_t>(req.spec.prompt.size());
  const int64_t first = req.spec.context_source.has_value() ? 1 : 0;
  const int64_t expected = o.handed_off ? 1 : req.spec.sampling.max_tokens - first;
  if (static_cast<int64_t>(o.tokens.size()) != expected) {
    Violation(
        o.rank, o.step,
        absl::StrCat("request ", id, " got ", o.tokens.size(), " tokens, expected ", expected));
    return;
  }
  for (int64_t i = 0; i < expected; ++i) {
    const int32_t want = reference_.TargetToken(req.spec.sampling.seed, prompt + first + i);
    if (o.tokens[i] != want) {
      Violation(
          o.rank, o.step,
          absl::StrCat("request ", id, " token ", i, " is ", o.tokens[i], ", expected ", want));
      return;
    }
  }
}

}  // namespace

std::string SimConfig::ToString() const {
  return absl::StrFormat(
      "seed=%d ranks=%d role=%s max_batch_size=%d K=%d method=%s dynamic_k=%d draft_pool=%s "
      "dummy_policy=%s capacity_policy=%s requests=%d blocks=%d draft_blocks=%d gen_only=%d "
      "faults=%d "
      "transfer_failure_rate=%.2f send_refusal_rate=%.2f prefix_reuse=%d conversations=%d "
      "system_prompt=%d hints=%d host_tier_blocks=%d",
      seed, ranks, sched::InstanceRoleName(role), scheduler.max_batch_size,
      scheduler.speculative.num_draft_tokens, spec::MethodName(scheduler.speculative.method),
      scheduler.speculative.dynamic, kv::DraftModeName(draft_mode),
      sched::DummyPolicyName(scheduler.dummy_policy),
      sched::CapacityPolicyName(scheduler.capacity_policy), workload.num_requests, num_blocks,
      draft_num_blocks, workload.generation_only, faults.size(), transfer_failure_rate,
      send_refusal_rate, scheduler.prefix_reuse, workload.conversations, workload.system_prompt,
      workload.hint_followups, host_tier_blocks);
}

std::string SimSummary::ToString() const {
  std::string out = absl::StrFormat(
      "requests %d: completed %d, handed off %d, failed %d, cancelled %d | steps %d, vetoed "
      "%d (%.1f per 1000), padded %d, dummies refused %d, deferred updates %d, stale updates "
      "skipped %d, paused %d, no-progress %d | tokens %d (%.2f per step), drafts accepted "
      "%d/%d | prefix reuse %d/%d prefill tokens (KV managers: targets %d, mirrors %d, from "
      "host tiers %d) | outcome digest %016x",
      requests, completed, handed_off, failed, cancelled, steps, vetoed_steps,
      vetoes_per_1000_steps, padded_steps, dummies_refused, deferred_updates, stale_updates, paused,
      no_progress, generated_tokens, tokens_per_step, drafts_accepted, drafts_proposed,
      reused_tokens, context_tokens, kv_reused_tokens, mirror_reused_tokens, tier_onboarded_tokens,
      outcome_digest);
  for (const std::string& v : violations) absl::StrAppend(&out, "\n  VIOLATION: ", v);
  return out;
}

SimSummary RunSimulation(const SimConfig& config) { return Simulation(config).Run(); }

}  // namespace lockstep::sim

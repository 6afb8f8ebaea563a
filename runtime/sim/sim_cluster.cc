#include "runtime/sim/sim_cluster.h"

#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "runtime/comm/faulty_communicator.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/transfer/fake_transceiver.h"

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
  absl::flat_hash_map<RequestId, Outcome> outcomes() const {
    absl::MutexLock lock(&mu_);
    return outcomes_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<RequestId, Outcome> outcomes_ ABSL_GUARDED_BY(mu_);
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
};

kv::KvManagerConfig KvConfig(const SimConfig& c) {
  kv::KvManagerConfig kv;
  // The fake engine touches no KV: one float per token keeps the slabs tiny.
  kv.target.layout = {1, 1, 1, c.tokens_per_block};
  kv.target.num_blocks = c.num_blocks;
  kv.target.enable_prefix_reuse = c.scheduler.prefix_reuse;
  kv.draft_mode = c.draft_mode;
  kv.draft.layout = kv.target.layout;
  kv.draft.num_blocks = c.draft_num_blocks;
  kv.draft.enable_prefix_reuse = c.scheduler.prefix_reuse;
  if (c.scheduler.dummy_policy == sched::DummyPolicy::kReserved) {
    kv.dummy_reserved_tokens = static_cast<int32_t>(c.scheduler.generation_step_tokens());
  }
  return kv;
}

}  // namespace

std::string SimConfig::ToString() const {
  return absl::StrFormat(
      "seed=%d ranks=%d role=%s max_batch_size=%d K=%d draft_pool=%s dummy_policy=%s "
      "requests=%d blocks=%d gen_only=%d faults=%d transfer_failure_rate=%.2f "
      "send_refusal_rate=%.2f",
      seed, ranks, exec::RoleName(role), scheduler.max_batch_size, scheduler.num_draft_tokens,
      kv::DraftModeName(draft_mode), sched::DummyPolicyName(scheduler.dummy_policy),
      workload.num_requests, num_blocks, workload.generation_only, faults.size(),
      transfer_failure_rate, send_refusal_rate);
}

std::string SimSummary::ToString() const {
  std::string out = absl::StrFormat(
      "requests %d: completed %d, handed off %d, failed %d, cancelled %d | steps %d, vetoed "
      "%d (%.1f per 1000), padded %d, dummies refused %d, deferred updates %d, stale updates "
      "skipped %d, paused %d, no-progress %d | tokens %d (%.2f per step), drafts accepted "
      "%d/%d",
      requests, completed, handed_off, failed, cancelled, steps, vetoed_steps,
      vetoes_per_1000_steps, padded_steps, dummies_refused, deferred_updates, stale_updates, paused,
      no_progress, generated_tokens, tokens_per_step, drafts_accepted, drafts_proposed);
  for (const std::string& v : violations) absl::StrAppend(&out, "\n  VIOLATION: ", v);
  return out;
}

SimSummary RunSimulation(const SimConfig& config) {
  const int n = config.ranks;
  engine::FakeEngineOptions engine_options;
  engine_options.draft_acceptance = config.draft_acceptance;
  engine_options.draft_seed = config.seed;
  engine_options.threaded = config.threaded_engine;
  engine_options.tokens_per_block = config.tokens_per_block;
  engine_options.target_num_blocks = config.num_blocks;
  engine_options.draft_num_blocks =
      config.draft_mode == kv::DraftMode::kNone ? 0 : config.draft_num_blocks;
  const engine::FakeEngine reference(engine_options);
  const std::vector<SimRequest> workload = GenerateWorkload(
      config.workload, config.seed, n, config.scheduler.num_draft_tokens, reference);

  SimSummary summary;
  summary.requests = static_cast<int64_t>(workload.size());
  absl::Mutex violations_mu;
  auto violation = [&](int rank, int64_t step, const std::string& what) {
    absl::MutexLock lock(&violations_mu);
    if (summary.violations.size() < 20) {
      summary.violations.push_back(
          absl::StrCat("seed ", config.seed, " step ", step, " rank ", rank, ": ", what));
    }
  };

  std::vector<std::unique_ptr<comm::Communicator>> group = comm::MakeInProcessGroup(n);
  std::vector<std::unique_ptr<comm::FaultyCommunicator>> faulty;
  std::vector<std::unique_ptr<FakeClock>> clocks;
  std::vector<std::unique_ptr<engine::BlockWriteTracker>> trackers;
  std::vector<std::unique_ptr<engine::FakeEngine>> engines;
  std::vector<std::unique_ptr<transfer::FakeTransceiver>> transceivers;
  std::vector<std::unique_ptr<exec::Executor>> executors;
  CollectingSink sink;
  for (int r = 0; r < n; ++r) {
    std::vector<comm::FaultRule> rules;
    for (const SimFault& f : config.faults) {
      if (f.rank != r) continue;
      if (f.kind == SimFault::Kind::kVeto) {
        // This rank reports an empty batch: the whole fleet skips the forward.
        rules.push_back(
            comm::FaultRule::Mutate(r, "vote", f.step, [](absl::Span<int64_t> v) { v[0] = 1; }));
      } else {
        rules.push_back(comm::FaultRule::Delay(r, "loads", f.step, f.delay));
      }
    }
    faulty.push_back(std::make_unique<comm::FaultyCommunicator>(group[r].get(), rules));
    clocks.push_back(std::make_unique<FakeClock>());
    trackers.push_back(std::make_unique<engine::BlockWriteTracker>());
    engine::FakeEngineOptions rank_engine = engine_options;
    rank_engine.tracker = trackers.back().get();
    engines.push_back(std::make_unique<engine::FakeEngine>(rank_engine));
    transfer::FakeTransceiverOptions t;
    t.seed = config.seed * 131 + static_cast<uint64_t>(r);
    t.min_latency = config.transfer_min_latency;
    t.max_latency = config.transfer_max_latency;
    t.failure_rate = config.transfer_failure_rate;
    t.send_refusal_rate = config.send_refusal_rate;
    t.tracker = trackers.back().get();
    transceivers.push_back(std::make_unique<transfer::FakeTransceiver>(t, clocks.back().get()));

    exec::ExecutorConfig ec;
    ec.instance = "sim";
    ec.role = config.role;
    ec.rank = r;
    ec.world_size = n;
    ec.scheduler = config.scheduler;
    ec.kv = KvConfig(config);
    ec.collective_timeout = absl::Seconds(60);
    ec.engine_timeout = absl::Seconds(60);
    ec.transfer_deadline = config.transfer_deadline;
    ec.transfer_address = "sim";
    // The executor's own audit also compares the pools across every unforwarded step.
    ec.audit_every_step = config.audit;
    exec::Executor::Deps deps;
    deps.comm = faulty.back().get();
    deps.engine = engines.back().get();
    absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(ec.kv);
    if (!kv.ok()) {
      violation(r, 0, absl::StrCat("KV manager: ", kv.status().ToString()));
      return summary;
    }
    deps.kv = std::move(*kv);
    deps.transceiver = transceivers.back().get();
    deps.clock = clocks.back().get();
    deps.sink = r == 0 ? &sink : nullptr;
    absl::StatusOr<std::unique_ptr<exec::Executor>> e = exec::Executor::Create(ec, std::move(deps));
    if (!e.ok()) {
      violation(r, 0, absl::StrCat("executor: ", e.status().ToString()));
      return summary;
    }
    executors.push_back(std::move(*e));
  }

  const absl::Time start = clocks[0]->Now();
  auto run_rank = [&](int r) {
    exec::Executor& e = *executors[r];
    FakeClock& clock = *clocks[r];
    size_t next_arrival = 0;
    std::vector<std::pair<int64_t, RequestId>> cancels;  // (step, id)
    bool drain_sent = false;
    for (int64_t step = 0; step < config.max_steps; ++step) {
      clock.Advance(config.step_time);
      if (r == 0) {
        const absl::Time now = clock.Now();
        while (next_arrival < workload.size() && start + workload[next_arrival].arrival <= now) {
          const SimRequest& req = workload[next_arrival++];
          exec::NewRequestSpec spec = req.spec;
          spec.arrival = now;
          e.inbox().Push(std::move(spec));
          if (req.cancel_after_steps >= 0) {
            cancels.emplace_back(step + req.cancel_after_steps, req.spec.id);
          }
        }
        for (auto it = cancels.begin(); it != cancels.end();) {
          if (it->first <= step) {
            e.inbox().Cancel(it->second);
            it = cancels.erase(it);
          } else {
            ++it;
          }
        }
        if (!drain_sent && next_arrival == workload.size() &&
            sink.finished() >= static_cast<int64_t>(workload.size())) {
          e.inbox().Drain();
          drain_sent = true;
        }
      }
      const absl::Status s = e.Step();
      if (!s.ok()) {
        violation(r, step, absl::StrCat("step failed: ", s.ToString()));
        return;
      }
      if (config.audit) {
        for (const std::string& v : e.Audit()) violation(r, step, absl::StrCat("audit: ", v));
      }
      if (e.drained()) return;
    }
    std::string state;
    for (const std::string& line : e.DescribeRequests()) absl::StrAppend(&state, "\n    ", line);
    violation(r, config.max_steps, absl::StrCat("did not finish within max_steps:", state));
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(run_rank, r);
  for (std::thread& t : threads) t.join();

  // Counters.
  for (int r = 0; r < n; ++r) {
    const exec::ExecutorCounters& c = executors[r]->counters();
    if (r == 0) {
      summary.steps = c.steps;
      summary.vetoed_steps = c.vetoed_steps;
    }
    summary.padded_steps += c.padded_steps;
    summary.dummies_refused += c.dummies_refused;
    summary.deferred_updates += c.deferred_updates;
    summary.stale_updates += c.stale_updates;
    summary.paused += c.paused;
    summary.no_progress += c.no_progress;
    summary.generated_tokens += c.generated_tokens;
    summary.drafts_proposed += c.drafts_proposed;
    summary.drafts_accepted += c.drafts_accepted;
    summary.transfer_failures += c.transfer_failures;
    if (c.audit_violations > 0) {
      violation(r, c.steps,
                absl::StrCat(c.audit_violations,
                             " audit violations or failed KV updates counted by the executor"));
    }
    // Every pool back to its baseline: only prefix-cache blocks may stay.
    const kv::ManagerStats kv = executors[r]->kv().Stats();
    if (kv.target.used_blocks != 0 || kv.target.num_caches != 0) {
      violation(r, c.steps,
                absl::StrCat("target pool not at baseline: ", kv.target.used_blocks, " blocks in ",
                             kv.target.num_caches, " caches"));
    }
    if (kv.draft && (kv.draft->used_blocks != 0 || kv.draft->num_caches != 0)) {
      violation(r, c.steps,
                absl::StrCat("draft pool not at baseline: ", kv.draft->used_blocks, " blocks in ",
                             kv.draft->num_caches, " caches"));
    }
  }
  if (summary.steps > 0) {
    summary.tokens_per_step =
        static_cast<double>(summary.generated_tokens) / static_cast<double>(summary.steps);
    summary.vetoes_per_1000_steps =
        1000.0 * static_cast<double>(summary.vetoed_steps) / static_cast<double>(summary.steps);
  }

  // Which requests had a fault injected: a failed receive (generation-only) or a
  // refused send (context-only) explains an error; only a client cancel explains a
  // cancellation.
  absl::flat_hash_set<std::pair<RequestId, transfer::InjectedFault::Kind>> injected;
  for (const auto& t : transceivers) {
    for (const transfer::InjectedFault& f : t->injected()) {
      injected.insert({f.id, f.kind});
      if (f.kind == transfer::InjectedFault::Kind::kSendRefusal) ++summary.send_refusals;
    }
  }

  // Outcomes and token correctness.
  const auto outcomes = sink.outcomes();
  for (const SimRequest& req : workload) {
    const int64_t id = req.spec.id.value();
    auto it = outcomes.find(req.spec.id);
    if (it == outcomes.end() || it->second.answers == 0) {
      violation(0, summary.steps, absl::StrCat("request ", id, " never finished"));
      continue;
    }
    const Outcome& o = it->second;
    if (o.answers > 1) {
      violation(o.rank, o.step,
                absl::StrCat("request ", id, " was answered ", o.answers, " times"));
    }
    if (o.reason == sched::FinishReason::kCancelled) {
      ++summary.cancelled;
      if (req.cancel_after_steps < 0) {
        violation(o.rank, o.step,
                  absl::StrCat(
                      "request ", id,
                      " was cancelled, but the client never cancelled it: ", o.status.ToString()));
      }
      continue;
    }
    if (o.reason == sched::FinishReason::kError) {
      ++summary.failed;
      const auto cause = req.spec.type == sched::RequestType::kContextOnly
                             ? transfer::InjectedFault::Kind::kSendRefusal
                             : transfer::InjectedFault::Kind::kTransferFailure;
      if (!injected.contains({req.spec.id, cause})) {
        violation(o.rank, o.step,
                  absl::StrCat("request ", id, " failed without an injected fault to explain it: ",
                               o.status.ToString()));
      }
      continue;
    }
    o.handed_off ? ++summary.handed_off : ++summary.completed;
    // Generation-only streams omit the first token (the context leg sent it); a
    // context-only leg that handed off its KV produced only the first token.
    const int64_t prompt = static_cast<int64_t>(req.spec.prompt.size());
    const int64_t first = req.spec.context_source.has_value() ? 1 : 0;
    const int64_t expected = o.handed_off ? 1 : req.spec.sampling.max_tokens - first;
    if (static_cast<int64_t>(o.tokens.size()) != expected) {
      violation(
          o.rank, o.step,
          absl::StrCat("request ", id, " got ", o.tokens.size(), " tokens, expected ", expected));
      continue;
    }
    for (int64_t i = 0; i < expected; ++i) {
      const int32_t want = reference.TargetToken(req.spec.sampling.seed, prompt + first + i);
      if (o.tokens[i] != want) {
        violation(
            o.rank, o.step,
            absl::StrCat("request ", id, " token ", i, " is ", o.tokens[i], ", expected ", want));
        break;
      }
    }
  }
  return summary;
}

}  // namespace lockstep::sim

#include "tests/executor/cluster.h"

#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace lockstep::testing {
namespace {

// Runs every batch on the fake engine, then fails the selected ones.
class FailingEngine : public engine::ModelEngine {
 public:
  FailingEngine(engine::ModelEngine* inner, std::function<bool(const engine::Batch&)> fail)
      : inner_(inner), fail_(std::move(fail)) {}
  engine::EngineInfo info() const override { return inner_->info(); }
  void Launch(engine::Batch batch) override {
    if (fail_(batch)) failing_.insert(batch.step);
    inner_->Launch(std::move(batch));
  }
  absl::StatusOr<engine::BatchResult> Collect(StepId step, absl::Duration timeout) override {
    absl::StatusOr<engine::BatchResult> result = inner_->Collect(step, timeout);
    if (failing_.erase(step) > 0) return absl::InternalError("injected engine failure");
    return result;
  }

 private:
  engine::ModelEngine* inner_;
  std::function<bool(const engine::Batch&)> fail_;
  absl::flat_hash_set<StepId> failing_;
};

sim::RankStackOptions StackOptions(const ClusterOptions& options, exec::ResponseSink* sink) {
  sim::RankStackOptions s;
  s.ranks = options.ranks;
  s.executor.instance = "test";
  s.executor.role = options.role;
  s.executor.scheduler = options.scheduler;
  const int32_t draft_blocks =
      options.draft_num_blocks > 0 ? options.draft_num_blocks : options.num_blocks;
  s.executor.kv = sim::FakeKvConfig(options.scheduler, options.draft_mode, options.tokens_per_block,
                                    options.num_blocks, draft_blocks);
  s.executor.kv.tiers.host_bytes = int64_t{options.host_tier_blocks} *
                                   static_cast<int64_t>(s.executor.kv.target.layout.BlockBytes());
  s.executor.collective_timeout = options.collective_timeout;
  s.executor.drain_timeout = options.drain_timeout;
  s.executor.transfer_deadline = options.transfer_deadline;
  s.executor.audit_every_step = true;  // also compares the pools across every unforwarded step
  s.executor.kv_events = options.kv_events;
  s.kv_event_sink = options.kv_event_sink;
  s.engine.draft_acceptance = options.draft_acceptance;
  s.engine.threaded = false;
  s.engine.tokens_per_block = options.tokens_per_block;
  s.engine.target_num_blocks = options.num_blocks;
  s.engine.draft_num_blocks = draft_blocks;
  s.engine.spec_method = options.scheduler.speculative.method;
  s.transceiver = [options](int r) {
    transfer::FakeTransceiverOptions t;
    t.seed = static_cast<uint64_t>(r);
    t.min_latency = r < static_cast<int>(options.rank_transfer_latency.size())
                        ? options.rank_transfer_latency[r]
                        : options.transfer_latency;
    t.max_latency = t.min_latency;
    t.failure_rate = options.transfer_failure_rate;
    t.refuse_send = options.refuse_send;
    return t;
  };
  s.attach_transceiver = options.with_transceiver;
  s.faults = options.faults;
  if (options.fail_batch) {
    s.wrap_engine = [fail = options.fail_batch](int r, engine::ModelEngine* fake) {
      return std::make_unique<FailingEngine>(
          fake, [fail, r](const engine::Batch& b) { return fail(r, b); });
    };
  }
  s.sink = sink;
  return s;
}

}  // namespace

ScriptedCluster::ScriptedCluster(const ClusterOptions& options) : options_(options) {
  const int n = options.ranks;
  absl::StatusOr<std::unique_ptr<sim::RankStacks>> stacks =
      sim::RankStacks::Build(StackOptions(options, this));
  LOCKSTEP_CHECK_OK(stacks.status());
  stacks_ = *std::move(stacks);
  {
    absl::MutexLock lock(&step_mu_);
    steps_done_.assign(n, 0);
    step_results_.assign(n, absl::OkStatus());
  }
  for (int r = 0; r < n; ++r) threads_.emplace_back([this, r] { RankLoop(r); });
}

ScriptedCluster::~ScriptedCluster() {
  {
    absl::MutexLock lock(&step_mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ScriptedCluster::RankLoop(int rank) {
  int64_t done = 0;
  while (true) {
    {
      absl::MutexLock lock(&step_mu_);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
        return stop_ || step_target_ > done;
      };
      step_mu_.Await(absl::Condition(&ready));
      if (stop_) return;
    }
    sim::RankStack& stack = stacks_->rank(rank);
    stack.clock->Advance(options_.step_time);
    absl::Status status = stack.executor->Step();
    ++done;
    absl::MutexLock lock(&step_mu_);
    step_results_[rank] = std::move(status);
    steps_done_[rank] = done;
  }
}

absl::Status ScriptedCluster::StepAll() {
  absl::MutexLock lock(&step_mu_);
  const int64_t target = ++step_target_;
  auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(step_mu_) {
    for (int64_t d : steps_done_) {
      if (d < target) return false;
    }
    return true;
  };
  step_mu_.Await(absl::Condition(&all_done));
  ++steps_;
  for (int r = 0; r < options_.ranks; ++r) {
    if (!step_results_[r].ok()) {
      return absl::Status(step_results_[r].code(),
                          absl::StrCat("rank ", r, ": ", step_results_[r].message()));
    }
  }
  return absl::OkStatus();
}

exec::NewRequestSpec ScriptedCluster::MakeRequest(int64_t id, int prompt_len, int max_tokens,
                                                  std::optional<int> pinned_rank) const {
  exec::NewRequestSpec s;
  s.id = RequestId(id);
  for (int i = 0; i < prompt_len; ++i) s.prompt.push_back((id * 31 + i) % 256);
  s.sampling.max_tokens = max_tokens;
  s.sampling.seed = static_cast<uint64_t>(id) * 7919;
  s.pinned_rank = pinned_rank;
  if (options_.role == sched::InstanceRole::kContext) s.type = sched::RequestType::kContextOnly;
  if (options_.role == sched::InstanceRole::kGeneration) {
    s.type = sched::RequestType::kGenerationOnly;
    sched::ContextSource c;
    c.instance = "ctx";
    c.address = "ctx-rank-0";
    c.remote_id = s.id;
    c.first_token = engine(0).TargetToken(s.sampling.seed, prompt_len);
    for (int k = 0; k < options_.scheduler.speculative.num_draft_tokens; ++k) {
      c.first_drafts.push_back(engine(0).DraftToken(s.sampling.seed, prompt_len + 1 + k));
    }
    s.context_source = std::move(c);
  }
  return s;
}

void ScriptedCluster::Submit(exec::NewRequestSpec spec) {
  spec.arrival = clock(0).Now();
  rank(0).inbox().Push(std::move(spec));
}

std::vector<int32_t> ScriptedCluster::ExpectedTokens(const exec::NewRequestSpec& spec) const {
  const int64_t prompt = static_cast<int64_t>(spec.prompt.size());
  const int first = spec.context_source.has_value() ? 1 : 0;
  std::vector<int32_t> out;
  for (int64_t i = first; i < spec.sampling.max_tokens; ++i) {
    out.push_back(engine(0).TargetToken(spec.sampling.seed, prompt + i));
  }
  return out;
}

std::vector<std::string> ScriptedCluster::AuditAll() const {
  std::vector<std::string> out;
  for (int r = 0; r < options_.ranks; ++r) {
    for (const std::string& v : stacks_->rank(r).executor->Audit())
      out.push_back(absl::StrCat("rank ", r, ": ", v));
  }
  return out;
}

void ScriptedCluster::OnResponses(std::vector<exec::Response> responses) {
  absl::MutexLock lock(&mu_);
  for (exec::Response& r : responses) {
    Stream& s = streams_[r.id];
    s.tokens.insert(s.tokens.end(), r.tokens.begin(), r.tokens.end());
    if (r.context) s.context = r.context;
    s.cached_prompt_tokens = r.cached_prompt_tokens;
    if (r.finished) {
      ++s.num_finished;
      s.finished = true;
      s.reason = r.finish_reason;
      s.status = r.status;
      s.kv_pull_failed = r.kv_pull_failed;
    }
  }
}

bool ScriptedCluster::AllFinished(int64_t expected) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, s] : streams_) n += s.finished ? 1 : 0;
  return n >= expected;
}

Stream ScriptedCluster::stream(RequestId id) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  return it == streams_.end() ? Stream() : it->second;
}

}  // namespace lockstep::testing

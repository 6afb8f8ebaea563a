// Scheduling pass cost per active request, and rank assignment cost.
//
//   bazel run -c opt //scheduler:scheduler_bench
#include <memory>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "common/check.h"
#include "scheduler/rank_assignment.h"
#include "scheduler/scheduler.h"
#include "spec_decode/speculative_config.h"

namespace lockstep::sched {
namespace {

// N decoding requests (K = 3, paired draft pool), every one scheduled each pass; the
// pass's growth is rolled back so every iteration sees the same state.
void BM_SchedulePass(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  SchedulerConfig config;
  config.max_batch_size = n;
  config.max_num_active_requests = n;
  config.max_num_tokens = 4 * n;
  config.speculative = {.method = spec::Method::kDraftModel, .num_draft_tokens = 3};
  config.prefix_reuse = false;
  kv::KvManagerConfig kc;
  kc.target.layout = {1, 1, 1, 16};
  kc.target.num_blocks = 16 * n;
  kc.target.enable_prefix_reuse = false;
  kc.draft_mode = kv::DraftMode::kPaired;
  kc.draft = kc.target;
  auto kv = *kv::KvManager::Create(kc);
  Scheduler scheduler(config, kv.get());
  std::vector<std::unique_ptr<Request>> requests;
  std::vector<Request*> active;
  for (int i = 0; i < n; ++i) {
    SamplingParams p;
    p.max_tokens = 1000;
    requests.push_back(std::make_unique<Request>(RequestId(i + 1), RequestType::kAggregated,
                                                 std::vector<int32_t>(60, 1), p,
                                                 absl::UnixEpoch()));
    Request* r = requests.back().get();
    LOCKSTEP_CHECK_OK(kv->CreateCache(r->id()).status());
    LOCKSTEP_CHECK_OK(kv->Resize(r->id(), kv::PoolKind::kTarget, 60, 60));
    r->set_context_position(60);
    r->set_start_order(i);
    r->TransitionTo(RequestState::kGenerationInProgress);
    active.push_back(r);
  }
  for (auto _ : state) {
    Rollback rollback;
    ScheduleDecision d = scheduler.Schedule(active, true, &rollback);
    LOCKSTEP_CHECK(static_cast<int>(d.generation.size()) == n);
    rollback.Undo(*kv);
    benchmark::DoNotOptimize(d);
  }
  // Seconds per scheduled request (shown in the unit Google Benchmark picks).
  state.counters["per_request"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * n,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SchedulePass)->Arg(16)->Arg(256)->Arg(1024);

void BM_AssignRanks(benchmark::State& state) {
  const int ranks = 8;
  std::mt19937_64 rng(1);
  std::vector<RankLoad> loads(ranks);
  for (RankLoad& l : loads) {
    l.active_requests = static_cast<int64_t>(rng() % 64);
    l.active_tokens = l.active_requests * 500;
  }
  std::vector<NewRequest> news;
  for (int i = 0; i < 256; ++i) {
    news.push_back({RequestId(i), 1 + static_cast<int64_t>(rng() % 4000), std::nullopt});
  }
  for (auto _ : state) {
    RankAssignment a = AssignRanks(loads, news, 1024);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_AssignRanks);

}  // namespace
}  // namespace lockstep::sched

BENCHMARK_MAIN();

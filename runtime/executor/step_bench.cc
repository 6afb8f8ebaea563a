// Host time per executor step: the whole step (intake broadcast, load all-gather,
// scheduling, vote, launch, completion of the previous batch, response gather) with a
// near-zero-cost FakeEngine (inline, no KV checks), at 1 and 4 in-process ranks and
// 16 / 256 / 768 decoding requests per rank.
//
//   bazel run -c opt //runtime/executor:step_bench
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/log.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"

namespace lockstep::exec {
namespace {

class NullSink : public ResponseSink {
 public:
  void OnResponses(std::vector<Response> responses) override {
    count_ += static_cast<int64_t>(responses.size());
  }
  int64_t count_ = 0;
};

constexpr int kWarmupSteps = 8;

void BM_Step(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const int per_rank = static_cast<int>(state.range(1));
  const int64_t steps = state.max_iterations;
  SetLogLevel(spdlog::level::warn);

  auto group = comm::MakeInProcessGroup(ranks);
  std::vector<std::unique_ptr<engine::FakeEngine>> engines;
  std::vector<std::unique_ptr<Executor>> executors;
  NullSink sink;
  const int32_t tpb = 16;
  const int32_t blocks = per_rank * static_cast<int32_t>((steps + kWarmupSteps + 64) / tpb + 2);
  for (int r = 0; r < ranks; ++r) {
    engine::FakeEngineOptions eo;
    eo.threaded = false;
    eo.check_kv_contract = false;
    engines.push_back(std::make_unique<engine::FakeEngine>(eo));
    ExecutorConfig ec;
    ec.rank = r;
    ec.world_size = ranks;
    ec.scheduler.max_batch_size = per_rank;
    ec.scheduler.max_num_active_requests = per_rank;
    ec.scheduler.max_num_tokens = 64 * per_rank;
    ec.scheduler.prefix_reuse = false;
    ec.kv.target.layout = {1, 1, 1, tpb};
    ec.kv.target.num_blocks = blocks;
    ec.kv.target.enable_prefix_reuse = false;
    ec.kv.dummy_reserved_tokens = 1;
    Executor::Deps deps;
    deps.comm = group[r].get();
    deps.engine = engines.back().get();
    deps.kv = *kv::KvManager::Create(ec.kv);
    deps.clock = SystemClock::Get();
    deps.sink = r == 0 ? &sink : nullptr;
    executors.push_back(*Executor::Create(ec, std::move(deps)));
  }
  for (int i = 0; i < ranks * per_rank; ++i) {
    NewRequestSpec s;
    s.id = RequestId(i + 1);
    s.prompt.assign(16, 7);
    s.sampling.max_tokens = static_cast<int32_t>(steps + kWarmupSteps + 32);
    s.sampling.seed = static_cast<uint64_t>(i);
    executors[0]->inbox().Push(std::move(s));
  }
  // Other ranks step in lockstep on their own threads.
  std::vector<std::thread> peers;
  for (int r = 1; r < ranks; ++r) {
    peers.emplace_back([&, r] {
      for (int64_t i = 0; i < steps + kWarmupSteps; ++i) LOCKSTEP_CHECK_OK(executors[r]->Step());
    });
  }
  for (int i = 0; i < kWarmupSteps; ++i) LOCKSTEP_CHECK_OK(executors[0]->Step());
  LOCKSTEP_CHECK(executors[0]->LiveIds().size() == static_cast<size_t>(per_rank));
  for (auto _ : state) LOCKSTEP_CHECK_OK(executors[0]->Step());
  for (std::thread& t : peers) t.join();
  state.counters["requests_per_rank"] = per_rank;
  state.counters["responses_per_step"] =
      static_cast<double>(sink.count_) / static_cast<double>(steps + kWarmupSteps);
}

BENCHMARK(BM_Step)
    ->ArgsProduct({{1, 4}, {16, 256, 768}})
    ->Iterations(300)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace lockstep::exec

BENCHMARK_MAIN();

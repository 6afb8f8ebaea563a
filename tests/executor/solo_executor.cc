#include "tests/executor/solo_executor.h"

#include <utility>

#include "common/check.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/in_process_communicator.h"
#include "runtime/engine/cpu/cpu_engine.h"

namespace lockstep::exec {

SoloExecutor MakeSoloExecutor(const ExecutorConfig& config, const std::string& model_dir,
                              ResponseSink* sink, const EngineWrapper& wrap) {
  absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config.kv);
  LOCKSTEP_CHECK_OK(kv.status());
  const bool draft_model = config.scheduler.speculative.method == spec::Method::kDraftModel;
  engine::CpuEngineOptions e;
  e.model_dir = model_dir;
  e.speculative = config.scheduler.speculative;
  if (draft_model) e.draft_model_dir = model_dir + "/draft";
  e.target_storage = reinterpret_cast<float*>((*kv)->Storage(kv::PoolKind::kTarget));
  e.target_layout = config.kv.target.layout;
  e.target_num_blocks = config.kv.target.num_blocks;
  if (draft_model) {
    e.draft_storage = reinterpret_cast<float*>((*kv)->Storage(kv::PoolKind::kDraft));
    e.draft_layout = config.kv.draft.layout;
    e.draft_num_blocks = config.kv.draft.num_blocks;
  }
  absl::StatusOr<std::unique_ptr<engine::ModelEngine>> cpu = engine::CreateCpuEngine(e);
  LOCKSTEP_CHECK_OK(cpu.status());
  SoloExecutor rank;
  rank.engine = *std::move(cpu);
  if (wrap) rank.engine = wrap(std::move(rank.engine));
  rank.comm = comm::MakeSoloCommunicator();
  Executor::Deps deps;
  deps.comm = rank.comm.get();
  deps.engine = rank.engine.get();
  deps.kv = *std::move(kv);
  deps.clock = SystemClock::Get();
  deps.sink = sink;
  absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::Create(config, std::move(deps));
  LOCKSTEP_CHECK_OK(executor.status());
  rank.executor = *std::move(executor);
  return rank;
}

std::vector<RequestId> RunWave(Executor& executor, const OutcomeSink& sink,
                               std::vector<NewRequestSpec> specs, int max_steps,
                               absl::string_view trace, std::vector<RequestId>& order) {
  std::vector<RequestId> wave;
  for (NewRequestSpec& s : specs) {
    s.id = RequestId(static_cast<int64_t>(order.size()) + 1);
    order.push_back(s.id);
    wave.push_back(s.id);
    executor.inbox().Push(std::move(s));
  }
  for (int step = 0; step < max_steps; ++step) {
    bool done = true;
    for (RequestId id : wave) {
      const auto it = sink.outcomes.find(id);
      done = done && it != sink.outcomes.end() && it->second.finished;
    }
    if (done) break;
    LOCKSTEP_CHECK_OK(executor.Step());
    EXPECT_THAT(executor.Audit(), ::testing::IsEmpty()) << trace << " step " << step;
  }
  return wave;
}

RunOutcomes CollectOutcomes(const Executor& executor, const OutcomeSink& sink,
                            const std::vector<RequestId>& order) {
  RunOutcomes run;
  for (RequestId id : order) {
    const auto it = sink.outcomes.find(id);
    run.outcomes.push_back(it == sink.outcomes.end() ? Outcome{} : it->second);
  }
  run.counters = executor.counters();
  run.kv = executor.kv().Stats();
  return run;
}

std::vector<int32_t> RandomBytes(std::mt19937_64& rng, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng() % 256));
  return t;
}

}  // namespace lockstep::exec

// One rank of the real stack for the executor tests and benches that run whole
// workloads through the CPU engine: the KV manager of an ExecutorConfig, the CPU engine
// on the manager's pools, a solo communicator and the executor; and the wave loop those
// tests share (submit, step until finished, audit after every step).
//
// Thread-compatible: the test thread builds and steps it.
#ifndef LOCKSTEP_TESTS_EXECUTOR_SOLO_EXECUTOR_H_
#define LOCKSTEP_TESTS_EXECUTOR_SOLO_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/ids.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/communicator.h"
#include "runtime/engine/model_engine.h"
#include "runtime/executor/executor.h"
#include "tests/executor/outcome_sink.h"

namespace lockstep::exec {

struct SoloExecutor {
  std::unique_ptr<comm::Communicator> comm;
  std::unique_ptr<engine::ModelEngine> engine;  // what the executor drives
  std::unique_ptr<Executor> executor;           // owns the KV manager; destroyed first
};

// Wraps the CPU engine (e.g. to inject a fault) before the executor gets it.
using EngineWrapper =
    std::function<std::unique_ptr<engine::ModelEngine>(std::unique_ptr<engine::ModelEngine>)>;

// Builds the rank of `config` over the model in `model_dir`. The CPU engine speculates
// as config.scheduler.speculative says; with kDraftModel its draft model is
// model_dir/draft, its KV in the manager's draft pool. Responses go to `sink`, which
// must outlive the rank. CHECK-fails when a part cannot be created.
SoloExecutor MakeSoloExecutor(const ExecutorConfig& config, const std::string& model_dir,
                              ResponseSink* sink, const EngineWrapper& wrap = nullptr);

// Pushes `specs` into the executor's inbox with the ids that continue `order` (1, 2, ...
// for the first wave), appending them to it, then steps until `sink` has every one of
// them finished or max_steps steps ran, expecting an empty audit after each step
// (`trace` names the run in a failure). Returns the wave's ids in submission order.
// CHECK-fails when a step fails.
std::vector<RequestId> RunWave(Executor& executor, const OutcomeSink& sink,
                               std::vector<NewRequestSpec> specs, int max_steps,
                               absl::string_view trace, std::vector<RequestId>& order);

// What a run leaves for comparison with another run.
struct RunOutcomes {
  std::vector<Outcome> outcomes;  // in submission order
  ExecutorCounters counters;
  kv::ManagerStats kv;
};

// The outcomes of `order` (missing ones empty), the counters and the KV statistics.
RunOutcomes CollectOutcomes(const Executor& executor, const OutcomeSink& sink,
                            const std::vector<RequestId>& order);

// `n` random bytes (tokens of the byte-level test models).
std::vector<int32_t> RandomBytes(std::mt19937_64& rng, int n);

}  // namespace lockstep::exec

#endif  // LOCKSTEP_TESTS_EXECUTOR_SOLO_EXECUTOR_H_

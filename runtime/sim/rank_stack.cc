#include "runtime/sim/rank_stack.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/comm/in_process_communicator.h"

namespace lockstep::sim {
namespace {

absl::Status RankError(int rank, const std::string& what, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("rank ", rank, ": ", what, ": ", status.ToString()));
}

}  // namespace

kv::KvManagerConfig FakeKvConfig(const sched::SchedulerConfig& scheduler, kv::DraftMode draft_mode,
                                 int32_t tokens_per_block, int32_t num_blocks,
                                 int32_t draft_num_blocks) {
  kv::KvManagerConfig kv;
  kv.target.layout = {1, 1, 1, tokens_per_block};
  kv.target.num_blocks = num_blocks;
  kv.target.enable_prefix_reuse = scheduler.prefix_reuse;
  kv.draft_mode = draft_mode;
  kv.draft.layout = kv.target.layout;
  kv.draft.num_blocks = draft_num_blocks;
  kv.draft.enable_prefix_reuse = scheduler.prefix_reuse;
  if (scheduler.dummy_policy == sched::DummyPolicy::kReserved) {
    kv.dummy_reserved_tokens = static_cast<int32_t>(scheduler.generation_step_tokens());
  }
  return kv;
}

absl::StatusOr<std::unique_ptr<RankStacks>> RankStacks::Build(const RankStackOptions& options) {
  const int n = options.ranks;
  std::unique_ptr<RankStacks> stacks(new RankStacks());
  if (options.make_group) {
    absl::StatusOr<std::vector<std::unique_ptr<comm::Communicator>>> group =
        options.make_group(n);
    if (!group.ok()) return group.status();
    stacks->group_ = *std::move(group);
  } else {
    stacks->group_ = comm::MakeInProcessGroup(n);
  }
  stacks->ranks_.resize(n);
  for (int r = 0; r < n; ++r) {
    RankStack& s = stacks->ranks_[r];
    std::vector<comm::FaultRule> rules;
    for (const comm::FaultRule& f : options.faults) {
      if (f.rank == r) rules.push_back(f);
    }
    s.comm = std::make_unique<comm::FaultyCommunicator>(stacks->group_[r].get(), rules);
    s.clock = std::make_unique<FakeClock>();
    if (options.track_block_writes) s.tracker = std::make_unique<engine::BlockWriteTracker>();
    engine::FakeEngineOptions engine_options = options.engine;
    transfer::FakeTransceiverOptions transceiver_options =
        options.transceiver ? options.transceiver(r) : transfer::FakeTransceiverOptions();
    if (s.tracker != nullptr) {
      engine_options.tracker = s.tracker.get();
      transceiver_options.tracker = s.tracker.get();
    }
    s.engine = std::make_unique<engine::FakeEngine>(engine_options);
    s.transceiver = std::make_unique<transfer::FakeTransceiver>(transceiver_options, s.clock.get());

    exec::ExecutorConfig config = options.executor;
    config.rank = r;
    config.world_size = n;
    config.transfer_address = absl::StrCat(config.instance, "-rank-", r);
    exec::Executor::Deps deps;
    deps.comm = s.comm.get();
    deps.engine = s.engine.get();
    if (options.wrap_engine) {
      s.wrapped_engine = options.wrap_engine(r, s.engine.get());
      deps.engine = s.wrapped_engine.get();
    }
    absl::StatusOr<std::unique_ptr<kv::KvManager>> kv = kv::KvManager::Create(config.kv);
    if (!kv.ok()) return RankError(r, "KV manager", kv.status());
    deps.kv = *std::move(kv);
    deps.transceiver = options.attach_transceiver ? s.transceiver.get() : nullptr;
    deps.clock = s.clock.get();
    deps.sink = r == 0 ? options.sink : nullptr;
    deps.kv_event_sink = r == 0 ? options.kv_event_sink : nullptr;
    absl::StatusOr<std::unique_ptr<exec::Executor>> executor =
        exec::Executor::Create(config, std::move(deps));
    if (!executor.ok()) return RankError(r, "executor", executor.status());
    s.executor = *std::move(executor);
  }
  return stacks;
}

}  // namespace lockstep::sim

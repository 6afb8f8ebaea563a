// RankStacks: N ranks of one instance in one process, each a real Executor over fakes —
// an InProcessCommunicator (behind a FaultyCommunicator with the rank's fault rules),
// a FakeClock, the FakeEngine and the FakeTransceiver. The simulator (sim_cluster.h)
// and the scripted executor tests (tests/executor/cluster.h) both build their ranks
// here; how the ranks are stepped is theirs.
#ifndef LOCKSTEP_RUNTIME_SIM_RANK_STACK_H_
#define LOCKSTEP_RUNTIME_SIM_RANK_STACK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "kvcache/kv_manager.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/faulty_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/testing/block_write_tracker.h"
#include "runtime/transfer/fake_transceiver.h"

namespace lockstep::sim {

// The pools of a fake-engine rank: the fake engine touches no KV, so one float per
// token keeps the slabs tiny. A reserved dummy policy reserves one generation step.
kv::KvManagerConfig FakeKvConfig(const sched::SchedulerConfig& scheduler, kv::DraftMode draft_mode,
                                 int32_t tokens_per_block, int32_t num_blocks,
                                 int32_t draft_num_blocks);

struct RankStackOptions {
  int ranks = 4;
  // Every rank's executor; rank, world_size and transfer_address ("INSTANCE-rank-R")
  // are set per rank.
  exec::ExecutorConfig executor;
  // Every rank's engine; `tracker` is set per rank with track_block_writes.
  engine::FakeEngineOptions engine;
  // A BlockWriteTracker per rank, shared by its engine and its transceiver.
  bool track_block_writes = false;
  // A rank's transceiver options (default if unset; `tracker` is set with
  // track_block_writes).
  std::function<transfer::FakeTransceiverOptions(int rank)> transceiver;
  bool attach_transceiver = true;       // false: built, but the executors get none
  std::vector<comm::FaultRule> faults;  // each on its rule's rank
  // Optional: the engine the executor gets instead of the rank's fake engine.
  std::function<std::unique_ptr<engine::ModelEngine>(int rank, engine::ModelEngine* fake)>
      wrap_engine;
  exec::ResponseSink* sink = nullptr;  // the leader's; not owned
  kv::KvEventSink* kv_event_sink = nullptr;  // the leader's, with executor.kv_events; not owned
  // The ranks' communicators (rank r at index r), under the fault wrappers. Default:
  // one InProcessCommunicator group; tests/sim runs the simulator over shm too.
  std::function<absl::StatusOr<std::vector<std::unique_ptr<comm::Communicator>>>(int ranks)>
      make_group;
};

// One rank's executor and everything it points to. Declared in construction order:
// the executor goes first.
struct RankStack {
  std::unique_ptr<comm::FaultyCommunicator> comm;
  std::unique_ptr<FakeClock> clock;
  std::unique_ptr<engine::BlockWriteTracker> tracker;  // with track_block_writes
  std::unique_ptr<engine::FakeEngine> engine;
  std::unique_ptr<engine::ModelEngine> wrapped_engine;  // with wrap_engine
  std::unique_ptr<transfer::FakeTransceiver> transceiver;
  std::unique_ptr<exec::Executor> executor;
};

class RankStacks {
 public:
  // Errors name the rank ("rank R: KV manager: ..." or "rank R: executor: ...").
  static absl::StatusOr<std::unique_ptr<RankStacks>> Build(const RankStackOptions& options);

  int size() const { return static_cast<int>(ranks_.size()); }
  RankStack& rank(int r) { return ranks_[r]; }
  const RankStack& rank(int r) const { return ranks_[r]; }

 private:
  RankStacks() = default;

  std::vector<std::unique_ptr<comm::Communicator>> group_;  // outlives the ranks
  std::vector<RankStack> ranks_;
};

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_RANK_STACK_H_

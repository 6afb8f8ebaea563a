// One simulated instance, as the single-instance simulator (sim_cluster.h) and the
// fleet (sim_fleet.h) both build it from a SimConfig: its ranks' options and the
// checks of its pools at the end of a run.
#ifndef LOCKSTEP_RUNTIME_SIM_SIM_INSTANCE_H_
#define LOCKSTEP_RUNTIME_SIM_SIM_INSTANCE_H_

#include <string>
#include <vector>

#include "runtime/comm/faulty_communicator.h"
#include "runtime/engine/fake/fake_engine.h"
#include "runtime/executor/executor.h"
#include "runtime/sim/rank_stack.h"
#include "runtime/sim/sim_cluster.h"

namespace lockstep::sim {

// The fake engine of every rank (and of the run's reference token function).
engine::FakeEngineOptions SimEngineOptions(const SimConfig& config);

// The ranks of instance `name` under `config`, its leader answering to `sink` (not
// owned), with config.faults and `extra_faults` (each on its rule's rank).
RankStackOptions SimRankStackOptions(const SimConfig& config, const std::string& name,
                                     exec::ResponseSink* sink,
                                     std::vector<comm::FaultRule> extra_faults = {});

// What keeps `e`'s pools from their baseline at the end of a run (only prefix-cache
// blocks may stay); empty when nothing does.
std::vector<std::string> PoolsNotAtBaseline(const exec::Executor& e);

}  // namespace lockstep::sim

#endif  // LOCKSTEP_RUNTIME_SIM_SIM_INSTANCE_H_

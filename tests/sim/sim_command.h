// `lockstep sim`: runs the deterministic multi-rank simulator.
//
//   lockstep sim --scenario dep4-small-batch --max-batch-size 2 --dummy-policy compat [--seed S]
//   lockstep sim --seeds 1000 --random-config [--first-seed S]
#ifndef LOCKSTEP_TESTS_SIM_SIM_COMMAND_H_
#define LOCKSTEP_TESTS_SIM_SIM_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::sim {

int RunSimCommand(const std::vector<std::string>& args);

}  // namespace lockstep::sim

#endif  // LOCKSTEP_TESTS_SIM_SIM_COMMAND_H_

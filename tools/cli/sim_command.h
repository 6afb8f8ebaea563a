// `lockstep sim`: runs the deterministic multi-rank simulator (runtime/sim).
//
//   lockstep sim --scenario dep4-small-batch --max-batch-size 2 --dummy-policy compat [--seed S]
//   lockstep sim --seeds 1000 --random-config [--seed S]
#ifndef LOCKSTEP_TOOLS_CLI_SIM_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_SIM_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunSimCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_SIM_COMMAND_H_

// `lockstep expert-loads ADDRESS [--out FILE]`: the expert-load dump of the instance
// whose leader's WorkerService is at ADDRESS (host:port), on request: its last
// expert-load window (eplb.load_window) from Stats, written in the text form the
// offline planner reads (`eplb_plan FILE R SLOTS`, docs/eplb.md) to FILE or stdout.
// Exit 1 with the reason on stderr when the leader does not answer or has no window
// yet; 2: usage.
#ifndef LOCKSTEP_TOOLS_CLI_EXPERT_LOADS_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_EXPERT_LOADS_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunExpertLoadsCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_EXPERT_LOADS_COMMAND_H_

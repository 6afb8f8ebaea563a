// `lockstep launch CONFIG [--run-dir DIR] [--lockstep PATH] [--ready-timeout-s N]
// [--grace-s N] [--restart-instances] [--max-restarts N]`: a whole local deployment
// from one YAML file, supervised until Ctrl-C (runtime/launcher/launcher.h).
#ifndef LOCKSTEP_TOOLS_CLI_LAUNCH_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_LAUNCH_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunLaunchCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_LAUNCH_COMMAND_H_

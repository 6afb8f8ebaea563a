// `lockstep probe ADDRESS`: exit 0 iff the instance leader at ADDRESS (host:port of its
// WorkerService) answers Health within --timeout-ms and reports itself serving; else
// 1 with the reason on stderr (2: usage). For Kubernetes readiness probes.
#ifndef LOCKSTEP_TOOLS_CLI_PROBE_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_PROBE_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunProbeCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_PROBE_COMMAND_H_

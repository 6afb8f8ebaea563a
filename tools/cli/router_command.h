// `lockstep router --config FILE [--http-listen H:P] [--grpc-listen H:P]`: runs the
// router until SIGINT or SIGTERM. Prints one line when serving:
//   lockstep router: http 127.0.0.1:8000 grpc 127.0.0.1:50051
#ifndef LOCKSTEP_TOOLS_CLI_ROUTER_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_ROUTER_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunRouterCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_ROUTER_COMMAND_H_

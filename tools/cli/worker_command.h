// `lockstep worker`: one rank of an instance.
//
//   lockstep worker --config FILE --role aggregated --instance NAME --rank R
//       --world-size N --rendezvous ADDR --listen ADDR
#ifndef LOCKSTEP_TOOLS_CLI_WORKER_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_WORKER_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunWorkerCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_WORKER_COMMAND_H_

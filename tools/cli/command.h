// A subcommand of the `lockstep` CLI: a function `int RunX(const std::vector<std::string>&
// args)` (tools/cli/*_command.h, tools/bench, tools/demo.h) that parses the flags into a
// library's options; main lists them explicitly (no static registration).
#ifndef LOCKSTEP_TOOLS_CLI_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_COMMAND_H_

#include <functional>
#include <string>
#include <vector>

namespace lockstep::cli {

struct Command {
  std::string name;
  std::string summary;
  // Returns the process exit status. `args` excludes the command name.
  std::function<int(const std::vector<std::string>& args)> run;
};

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_COMMAND_H_

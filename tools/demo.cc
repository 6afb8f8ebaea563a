#include "tools/demo.h"

#include <cstdio>

#include "tools/cli/flags.h"

namespace lockstep {

int RunDemo(const std::vector<std::string>& args) {
  cli::FlagSet flags("demo");
  if (absl::Status s = flags.Parse(args); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Usage().c_str());
    return 0;
  }
  std::printf("lockstep demo: the build works; the serving demo arrives with the daemons.\n");
  return 0;
}

}  // namespace lockstep

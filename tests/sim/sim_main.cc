// Standalone simulator binary (the same as `lockstep sim`), for quick runs.
#include <string>
#include <vector>

#include "tests/sim/sim_command.h"

int main(int argc, char** argv) {
  return lockstep::sim::RunSimCommand(std::vector<std::string>(argv + 1, argv + argc));
}

// `lockstep demo`: the most complete end-to-end run the project can do.
#ifndef LOCKSTEP_TOOLS_DEMO_H_
#define LOCKSTEP_TOOLS_DEMO_H_

#include <string>
#include <vector>

namespace lockstep {

int RunDemo(const std::vector<std::string>& args);

}  // namespace lockstep

#endif  // LOCKSTEP_TOOLS_DEMO_H_

// Picks a TCP port that is free now on `host`, by binding port 0 and closing. Another
// process may take it before it is used; good enough for local deployments.
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_FREE_PORT_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_FREE_PORT_H_

#include <string>

#include "absl/status/statusor.h"

namespace lockstep::launcher {

absl::StatusOr<int> PickFreePort(const std::string& host = "127.0.0.1");

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_FREE_PORT_H_

// `lockstep launch CONFIG [--run-dir DIR] [--lockstep PATH] [--ready-timeout-s N]
// [--grace-s N] [--restart-instances] [--max-restarts N]`: starts a whole local
// deployment from one YAML file (launch_plan.h), waits until the router is up and
// every configured instance is healthy (bounded), prints the endpoints (and writes
// them to DIR/endpoints.json), then supervises.
//
// Ctrl-C or SIGTERM stops everything (SIGTERM to every child, SIGKILL after the grace
// period) and exits 0. A child that dies is reported with its exit status and its log
// file. A dead rank takes its instance down (its other ranks are stopped: they cannot
// step without it) while the router and the other instances go on; with
// --restart-instances the instance is started again, at most --max-restarts times. A
// dead router stops everything (exit 1), as does a failure to become ready. Children
// die with the launcher even if it is SIGKILLed (process_supervisor.h).
#ifndef LOCKSTEP_RUNTIME_LAUNCHER_LAUNCHER_H_
#define LOCKSTEP_RUNTIME_LAUNCHER_LAUNCHER_H_

#include <string>
#include <vector>

namespace lockstep::launcher {

int RunLaunch(const std::vector<std::string>& args);

}  // namespace lockstep::launcher

#endif  // LOCKSTEP_RUNTIME_LAUNCHER_LAUNCHER_H_

// `lockstep plan slurm CONFIG --nodes n1,n2,...`: prints the job script body that runs
// the deployment in a Slurm allocation (deploy/slurm/slurm_plan.h); exit 2 with the
// field or flag named when the config does not fit.
#ifndef LOCKSTEP_TOOLS_CLI_PLAN_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_PLAN_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunPlanCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_PLAN_COMMAND_H_

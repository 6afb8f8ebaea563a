// `lockstep render k8s CONFIG --image IMAGE --out DIR`: writes the Kubernetes manifests
// of a deployment (deploy/k8s/k8s_render.h) into DIR; exit 2 with the field or flag
// named when the config does not fit.
#ifndef LOCKSTEP_TOOLS_CLI_RENDER_COMMAND_H_
#define LOCKSTEP_TOOLS_CLI_RENDER_COMMAND_H_

#include <string>
#include <vector>

namespace lockstep::cli {

int RunRenderCommand(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#endif  // LOCKSTEP_TOOLS_CLI_RENDER_COMMAND_H_

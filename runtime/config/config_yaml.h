// Reads a DeploymentConfig from YAML (schema and defaults: deployment_config.h).
//
// Strict: unknown keys, values of the wrong type (an integer field given "abc" or
// 1.5), and values outside their range are errors naming the field by its path
// (`instances[0].kv.num_blocks: ...`), with the line in the file where it helps. A
// field left out keeps its default. Relative paths (model paths, router.api_keys_file, the
// security files) are resolved against the directory of the config file.
#ifndef LOCKSTEP_RUNTIME_CONFIG_CONFIG_YAML_H_
#define LOCKSTEP_RUNTIME_CONFIG_CONFIG_YAML_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/config/deployment_config.h"

namespace lockstep::config {

// Parses and validates `yaml_text`. `base_dir` resolves relative paths (empty: they
// stay as written); `source` names the text in errors (a file name).
absl::StatusOr<DeploymentConfig> ParseDeploymentConfig(std::string_view yaml_text,
                                                       std::string_view base_dir,
                                                       std::string_view source = "<config>");

// Reads the file at `path`, then ParseDeploymentConfig with the file's directory.
absl::StatusOr<DeploymentConfig> LoadDeploymentConfig(const std::string& path);

}  // namespace lockstep::config

#endif  // LOCKSTEP_RUNTIME_CONFIG_CONFIG_YAML_H_

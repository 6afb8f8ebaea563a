// Writes a JSON value (objects in insertion order) as block-style YAML, the way
// Kubernetes manifests are written by hand: two-space indents, sequences of mappings
// as "- key: value", multi-line strings as literal blocks ("|"). A string is written
// plain only when YAML would read it back as that same string (not a number, a bool,
// null, or anything with special characters); otherwise it is double-quoted.
#ifndef LOCKSTEP_DEPLOY_K8S_YAML_WRITER_H_
#define LOCKSTEP_DEPLOY_K8S_YAML_WRITER_H_

#include <string>

#include "nlohmann/json.hpp"

namespace lockstep::deploy {

// One YAML document (no "---"), ending in a newline.
std::string ToYaml(const nlohmann::ordered_json& value);

}  // namespace lockstep::deploy

#endif  // LOCKSTEP_DEPLOY_K8S_YAML_WRITER_H_

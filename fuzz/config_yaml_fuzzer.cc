// The deployment YAML loader on arbitrary text: it returns a config or an error, never
// crashes, and a config it accepts validates.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/config/config_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<lockstep::config::DeploymentConfig> config =
      lockstep::config::ParseDeploymentConfig(text, "/base", "<fuzz>");
  if (config.ok() && !config->Validate().ok()) std::abort();
  return 0;
}

#include "kvcache/tier_config.h"

#include "absl/strings/str_cat.h"

namespace lockstep::kv {

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kDevice:
      return "device";
    case Tier::kHost:
      return "host";
    case Tier::kDisk:
      return "disk";
  }
  return "unknown";
}

absl::Status TierConfig::Validate() const {
  if (host_bytes < 0 || disk_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_tiers: sizes cannot be negative (host ",
                                                   host_bytes, ", disk ", disk_bytes, ")"));
  }
  if (disk_bytes > 0 && disk_path.empty()) {
    return absl::InvalidArgumentError("kv_tiers: disk_bytes is set but disk_path is empty");
  }
  if (!disk_path.empty() && disk_bytes == 0) {
    return absl::InvalidArgumentError("kv_tiers: disk_path is set but disk_bytes is 0");
  }
  if (!disk_path.empty() && host_bytes == 0) {
    return absl::InvalidArgumentError(
        "kv_tiers: a disk tier needs a host tier (host_bytes > 0): blocks reach the disk "
        "through the host");
  }
  return absl::OkStatus();
}

}  // namespace lockstep::kv

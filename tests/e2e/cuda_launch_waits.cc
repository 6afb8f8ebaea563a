#include "tests/e2e/cuda_launch_waits.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"

namespace lockstep::e2e {

LaunchWaits SplitLimit(absl::Duration limit) {
  const absl::Duration usable = std::max(limit - LaunchWaits::kReportReserve, absl::Seconds(4));
  LaunchWaits waits;
  waits.make_model = std::min(absl::Seconds(20), usable * 0.15);
  waits.requests = std::min(absl::Seconds(30), usable * 0.2);
  waits.stop = std::min(absl::Seconds(20), usable * 0.15);
  waits.ready = usable - waits.make_model - waits.requests - waits.stop;
  // The launcher's own readiness timeout ends 5 s (or a tenth) before ours, whole seconds.
  const absl::Duration launcher = waits.ready - std::min(absl::Seconds(5), waits.ready / 10);
  waits.launcher_ready_timeout_s =
      std::max<int>(1, static_cast<int>(absl::ToInt64Seconds(launcher)));
  return waits;
}

absl::Duration CheckLimit(absl::Duration fallback) {
  for (const char* name : {"LOCKSTEP_CHECK_TIMEOUT_S", "TEST_TIMEOUT"}) {
    const char* value = std::getenv(name);
    int seconds = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &seconds) && seconds > 0) {
      return absl::Seconds(seconds);
    }
  }
  return fallback;
}

}  // namespace lockstep::e2e

#include "runtime/router/migration.h"

#include "absl/strings/str_join.h"
#include "fmt/format.h"

namespace lockstep::router {

std::string_view MigrationReasonName(MigrationReason reason) {
  switch (reason) {
    case MigrationReason::kNone:
      return "none";
    case MigrationReason::kStreamBroken:
      return "stream_broken";
    case MigrationReason::kInstanceUnhealthy:
      return "instance_unhealthy";
    case MigrationReason::kWorkerError:
      return "worker_error";
  }
  return "none";
}

bool WorkerErrorMigrates(int32_t code) {
  return code == static_cast<int32_t>(absl::StatusCode::kUnavailable) ||
         code == static_cast<int32_t>(absl::StatusCode::kAborted);
}

absl::Status MigrationVerdict(const absl::Status& failure, MigrationReason reason,
                              const std::vector<std::string>& attempts, int migrations, int limit,
                              bool other_instance, std::string_view role) {
  if (reason == MigrationReason::kNone) return failure;
  const std::string tried = fmt::format("{} attempt{} on {}", attempts.size(),
                                        attempts.size() == 1 ? "" : "s",
                                        absl::StrJoin(attempts, ", "));
  if (migrations >= limit) {
    return absl::Status(
        failure.code(),
        fmt::format("{} (after {}; router.migration_limit = {} migrations)",
                    std::string(failure.message()), tried, limit));
  }
  if (!other_instance) {
    return absl::Status(
        failure.code(),
        fmt::format("{} (no other healthy {} instance to migrate to; {})",
                    std::string(failure.message()), role, tried));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::router

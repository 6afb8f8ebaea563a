#include "runtime/router/core/migration.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
    case MigrationReason::kKvPullFailed:
      return "kv_pull_failed";
  }
  return "none";
}

bool WorkerErrorMigrates(int32_t code) {
  return code == static_cast<int32_t>(absl::StatusCode::kUnavailable) ||
         code == static_cast<int32_t>(absl::StatusCode::kAborted);
}

std::string AttemptsText(const std::vector<std::string>& attempts) {
  return fmt::format("{} attempt{} [{}]", attempts.size(), attempts.size() == 1 ? "" : "s",
                     absl::StrJoin(attempts, "; "));
}

absl::Status MigrationVerdict(const absl::Status& failure, MigrationReason reason,
                              const std::vector<std::string>& attempts, int migrations, int limit,
                              bool other_instance, std::string_view role) {
  if (reason == MigrationReason::kNone) return failure;
  if (migrations >= limit) {
    return absl::Status(failure.code(),
                        fmt::format("{} (after {}; router.migration_limit = {} migrations)",
                                    std::string(failure.message()), AttemptsText(attempts), limit));
  }
  if (!other_instance) {
    return absl::Status(failure.code(),
                        fmt::format("{} (no other healthy {} instance to migrate to; after {})",
                                    std::string(failure.message()), role, AttemptsText(attempts)));
  }
  return absl::OkStatus();
}

absl::Status AfterMigrations(const absl::Status& failure, const std::vector<std::string>& attempts,
                             int migrations) {
  return absl::Status(failure.code(),
                      fmt::format("{} (migrated {} time{}; {})", std::string(failure.message()),
                                  migrations, migrations == 1 ? "" : "s", AttemptsText(attempts)));
}

std::string MigrationLogLine(const MigrationRecord& record) {
  return fmt::format("request {} failed on {} ({}) after {} tokens; continues as {}",
                     record.request_id, record.instance, record.reason, record.delivered,
                     record.continuation_id);
}

std::optional<MigrationRecord> ParseMigrationLogLine(std::string_view text) {
  const absl::string_view line(text.data(), text.size());
  const size_t start = line.find("request ");
  if (start == absl::string_view::npos || line.find("; continues as ") == absl::string_view::npos) {
    return std::nullopt;
  }
  // request ID failed on INSTANCE (REASON) after N tokens; continues as ID
  const std::vector<absl::string_view> w = absl::StrSplit(line.substr(start), ' ');
  MigrationRecord r;
  if (w.size() != 12 || w[2] != "failed" || w[3] != "on" || w[5].size() < 3 ||
      w[5].front() != '(' || w[5].back() != ')' || w[6] != "after" || w[8] != "tokens;" ||
      !absl::SimpleAtoi(w[1], &r.request_id) || !absl::SimpleAtoi(w[7], &r.delivered) ||
      !absl::SimpleAtoi(w[11], &r.continuation_id)) {
    return std::nullopt;
  }
  r.instance = std::string(w[4]);
  r.reason = std::string(w[5].substr(1, w[5].size() - 2));
  return r;
}

}  // namespace lockstep::router

#include "runtime/router/routing/queue_limit.h"

#include "absl/strings/match.h"
#include "fmt/format.h"

namespace lockstep::router {
namespace {

constexpr char kField[] = "(router.max_queued_requests)";

}  // namespace

absl::Status QueueFullStatus(std::string_view role, int64_t max_queued) {
  return absl::ResourceExhaustedError(
      fmt::format("every healthy {} instance has {} requests outstanding from this router {}; "
                  "retry later",
                  role, max_queued, kField));
}

bool IsQueueFull(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         absl::StrContains(status.message(), kField);
}

}  // namespace lockstep::router

// Request migration: when the instance serving a request fails, the router resumes the
// request on another healthy instance of the same role as a continuation, and the
// client's stream goes on with exactly the tokens it would have got (docs/design.md §4).
//
// The continuation is sched::ContinueAfter (scheduler/continuation.h): the original
// prompt followed by the tokens already delivered, the rest of max_tokens, the same
// seed and sampling parameters, num_generated_in_prompt = the delivered count.
//
// Only instance failures migrate: a broken stream, an instance the health monitor
// found unhealthy, a worker error that blames the instance (UNAVAILABLE, ABORTED), or
// a generation worker's failed KV pull (blamed on the context instance, whatever its
// code). A client cancel, a stop, a validation error or the request's deadline never
// does.
//
// router.migration_limit counts migrations: a request makes at most 1 + limit attempts
// (the default 2: three attempts). An attempt is one route through the instances: one
// aggregated leg, or a context leg and its generation leg.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_MIGRATION_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_MIGRATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace lockstep::router {

// Why an attempt failed in a way that may migrate.
enum class MigrationReason {
  kNone,               // the attempt did not fail, or failed for a reason that never migrates
  kStreamBroken,       // the Generate stream broke or ended before the request finished
  kInstanceUnhealthy,  // the health monitor ended the leg
  kWorkerError,        // the worker reported an error that blames the instance
  // The generation worker could not pull the KV from the context rank (the pull failed
  // or missed transfer.deadline_ms): the context instance is blamed, not the generation
  // instance that reported it.
  kKvPullFailed,
};

// The metric label: "stream_broken", "instance_unhealthy", "worker_error",
// "kv_pull_failed" ("none").
std::string_view MigrationReasonName(MigrationReason reason);

// Whether a worker's error response with this canonical code blames the instance
// (UNAVAILABLE: a rank stopped, the instance drains; ABORTED) rather than the request.
bool WorkerErrorMigrates(int32_t code);

// The attempts of a request, for its errors: "1 attempt [agg0]",
// "2 attempts [ctx0->gen0; ctx1->gen0]". `attempts` holds each attempt's route in order
// (its instances joined by "->"; "ctx0" for one that ended in its context leg).
std::string AttemptsText(const std::vector<std::string>& attempts);

// What the router does after an attempt failed with `failure` (not OK; `reason` kNone:
// not an instance failure), when `attempts` ran (AttemptsText, the failed one last),
// `migrations` migrations already happened, at most `limit` are allowed and
// `other_instance` says whether a healthy instance of the role exists that the request
// has not failed on. OK: migrate. Otherwise the request's final status: `failure`
// itself when it does not migrate, or an error of its code that says why no migration
// happened and names the attempts:
//   ... (after 3 attempts [agg0; agg1; agg2]; router.migration_limit = 2 migrations)
//   ... (no other healthy context instance to migrate to; after 1 attempt [ctx0->gen0])
absl::Status MigrationVerdict(const absl::Status& failure, MigrationReason reason,
                              const std::vector<std::string>& attempts, int migrations, int limit,
                              bool other_instance, std::string_view role);

// The final status of a request that migrated `migrations` (> 0) times and then ended
// with `failure` for a reason that does not migrate (its deadline, a queue limit, a
// validation error): `failure` with the history, e.g.
//   ... retry later (migrated 1 time; 1 attempt [agg0])
absl::Status AfterMigrations(const absl::Status& failure, const std::vector<std::string>& attempts,
                             int migrations);

// One migration as the router logs it (at WARN, one line each):
//   request 17 failed on agg0 (worker_error) after 5 tokens; continues as 18
// `lockstep bench` and the end-to-end tests find the migrated requests by these lines.
struct MigrationRecord {
  uint64_t request_id = 0;  // the router's (the OpenAI response id's number)
  std::string instance;     // where the attempt failed
  std::string reason;       // MigrationReasonName
  int64_t delivered = 0;    // tokens delivered before the failure
  uint64_t continuation_id = 0;
};
std::string MigrationLogLine(const MigrationRecord& record);
// The record in `line` (a log line: the message may follow a prefix); nullopt when
// the line is not a migration's.
std::optional<MigrationRecord> ParseMigrationLogLine(std::string_view line);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_MIGRATION_H_

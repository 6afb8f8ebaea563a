// Request migration: when the instance serving a request fails, the router resumes the
// request on another healthy instance of the same role as a continuation, and the
// client's stream goes on with exactly the tokens it would have got (docs/design.md §4).
//
// A continuation's prompt is the original prompt followed by the tokens already
// delivered; it asks for the tokens still to generate, with the same seed and sampling
// parameters, and SamplingParams.num_generated_in_prompt = the delivered count, so
// the penalties and min_tokens see those tokens as output. Sampling being a pure
// function of (seed, absolute position, the sequence's tokens), the continuation
// samples what the original would have.
//
// Only instance failures migrate: a broken stream, an instance the health monitor
// found unhealthy, or a worker error that blames the instance (UNAVAILABLE, ABORTED).
// A client cancel, a stop, a validation error or the request's deadline never does.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_RUNTIME_ROUTER_MIGRATION_H_
#define LOCKSTEP_RUNTIME_ROUTER_MIGRATION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/worker.pb.h"

namespace lockstep::router {

// Why an attempt failed in a way that may migrate.
enum class MigrationReason {
  kNone,               // the attempt did not fail, or failed for a reason that never migrates
  kStreamBroken,       // the Generate stream broke or ended before the request finished
  kInstanceUnhealthy,  // the health monitor ended the leg
  kWorkerError,        // the worker reported an error that blames the instance
};

// The metric label: "stream_broken", "instance_unhealthy", "worker_error" ("none").
std::string_view MigrationReasonName(MigrationReason reason);

// Whether a worker's error response with this canonical code blames the instance
// (UNAVAILABLE: a rank stopped, the instance drains; ABORTED) rather than the request.
bool WorkerErrorMigrates(int32_t code);

// `original` continued after the tokens `delivered` so far, as request `request_id`:
// prompt + delivered, max_tokens less the delivered count, num_generated_in_prompt
// grown by it; seed, the other sampling parameters, type and model unchanged, no
// context (the caller routes it afresh and sets the type of each leg). Requires
// delivered.size() < max_tokens.
v1::GenerateRequest ContinuationOf(const v1::GenerateRequest& original,
                                   absl::Span<const int32_t> delivered, uint64_t request_id);

// What the router does after an attempt failed with `failure` (not OK; `reason` kNone: not an
// instance failure) on the instances `attempts` (every instance the request ran on,
// in order), when `migrations` migrations already happened, at most `limit` are
// allowed and `other_instance` says whether a healthy instance of the role exists
// that the request has not failed on. OK: migrate. Otherwise the request's final
// status: `failure` itself when it does not migrate, or an error of its code that says
// why no migration happened and names the attempts.
absl::Status MigrationVerdict(const absl::Status& failure, MigrationReason reason,
                              const std::vector<std::string>& attempts, int migrations, int limit,
                              bool other_instance, std::string_view role);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_MIGRATION_H_

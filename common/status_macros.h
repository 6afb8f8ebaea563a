// Early-return helpers for absl::Status and absl::StatusOr, modelled on the upstream
// Abseil macros (which the Debian Abseil 20220623 does not ship).
//
//   RETURN_IF_ERROR(DoThing());
//   ASSIGN_OR_RETURN(auto value, ComputeValue());
//   ASSIGN_OR_RETURN(value_, ComputeValue());
//
// Do not use these between two collectives of a step: every rank must reach every
// collective (docs/design.md §3). Handle the local error on this rank instead (fail the
// request: its final response goes out at the response gather, and the vote only
// carries a count, `StepVote::errors`).
#ifndef LOCKSTEP_COMMON_STATUS_MACROS_H_
#define LOCKSTEP_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define LOCKSTEP_STATUS_CONCAT_INNER_(a, b) a##b
#define LOCKSTEP_STATUS_CONCAT_(a, b) LOCKSTEP_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) once and returns it from the enclosing function
// when it is not OK.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status lockstep_status_ = (expr);            \
    if (!lockstep_status_.ok()) return lockstep_status_; \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>) once; on error returns its status, otherwise
// move-assigns the value to `lhs` (which may be a declaration).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  LOCKSTEP_ASSIGN_OR_RETURN_IMPL_(LOCKSTEP_STATUS_CONCAT_(lockstep_statusor_, __LINE__), lhs, rexpr)

#define LOCKSTEP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()

#endif  // LOCKSTEP_COMMON_STATUS_MACROS_H_

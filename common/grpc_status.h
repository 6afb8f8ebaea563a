// absl::Status <-> grpc::Status at the gRPC edges (servers, stubs). The canonical
// codes have the same numbers on both sides, so the conversion keeps code and message.
//
// A separate target from the rest of common/: kvcache, scheduler and runtime/executor
// must never depend on it (they never include gRPC).
#ifndef LOCKSTEP_COMMON_GRPC_STATUS_H_
#define LOCKSTEP_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace lockstep {

grpc::Status ToGrpcStatus(const absl::Status& status);

absl::Status FromGrpcStatus(const grpc::Status& status);
// The same, with the message prefixed "`context`: " (what was being called) when not OK.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view context);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_GRPC_STATUS_H_

// Conversion between the WorkerService wire types (proto/worker.proto) and the
// executor's domain types. The only place where the two meet.
#ifndef LOCKSTEP_RUNTIME_WORKER_PROTO_CONVERT_H_
#define LOCKSTEP_RUNTIME_WORKER_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/worker.pb.h"
#include "runtime/executor/intake.h"
#include "runtime/executor/response.h"

namespace lockstep::worker {

// InvalidArgument naming the field for a malformed request.
absl::StatusOr<exec::NewRequestSpec> ToRequestSpec(const v1::GenerateRequest& request,
                                                   absl::Time now);

v1::GenerateResponse ToProto(const exec::Response& response);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_RUNTIME_WORKER_PROTO_CONVERT_H_

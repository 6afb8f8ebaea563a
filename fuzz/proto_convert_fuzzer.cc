// The worker's GenerateRequest → request conversion on arbitrary wire bytes: whatever
// parses as a GenerateRequest converts to a request spec or an error, never crashes.
#include <cstddef>
#include <cstdint>

#include "absl/time/clock.h"
#include "proto/worker.pb.h"
#include "runtime/worker/proto_convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lockstep::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<lockstep::exec::NewRequestSpec> spec =
      lockstep::worker::ToRequestSpec(request, absl::FromUnixSeconds(1'700'000'000));
  (void)spec;
  return 0;
}

// Words for cpp-httplib's transport errors, for reports a person reads ("read timed out
// after 600 s" rather than "transport error 4").
#ifndef LOCKSTEP_TOOLS_BENCH_HTTP_ERROR_H_
#define LOCKSTEP_TOOLS_BENCH_HTTP_ERROR_H_

#include <string>

#include "absl/time/time.h"
#include "httplib.h"

namespace lockstep::bench {

// What went wrong with a request that got no complete HTTP response. httplib reports a
// read timeout and a connection the server closed both as Error::Read; `idle` (time
// since the last byte arrived, or since the request was sent) against `read_timeout`
// tells them apart. `connect_timeout` is named in a connection timeout.
std::string DescribeHttpError(httplib::Error error, absl::Duration idle,
                              absl::Duration read_timeout, absl::Duration connect_timeout);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_HTTP_ERROR_H_

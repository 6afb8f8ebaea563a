// Helpers shared by the end-to-end tests.
#ifndef LOCKSTEP_TESTS_E2E_E2E_UTIL_H_
#define LOCKSTEP_TESTS_E2E_E2E_UTIL_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "proto/worker.pb.h"
#include "runtime/launcher/local_deployment.h"

namespace lockstep::e2e {

// The collective transport (comm.vote_transport and comm.engine_transport) of the
// test's deployments: shm in the *_shm_test targets, which compile their test with
// LOCKSTEP_E2E_SHM; gloo otherwise. Internal linkage: each test binary has its own.
#ifdef LOCKSTEP_E2E_SHM
constexpr absl::string_view kE2eComm = "shm";
#else
constexpr absl::string_view kE2eComm = "gloo";
#endif

// An instance's `comm:` line (YAML, 4 spaces in) for `transport`.
std::string CommSettings(absl::string_view transport);

// "" when every rank of `d` logged that both its collective groups use `transport`;
// otherwise the ranks that did not.
std::string CheckTransport(const launcher::LocalDeployment& d, absl::string_view transport);

// Writes a tiny-moe model (and its draft) into `dir` unless one is there.
absl::Status EnsureTinyMoe(const std::string& dir);

// The `lockstep` binary in the test's runfiles (the test depends on //tools:lockstep).
std::string LockstepBinary();

// The deployment of the disaggregated tests: context DEP2 + generation DEP4 with
// max_batch_size 2 per rank, K = 3, unpaired draft pools, the audit on every step. With
// `fault_timeouts`, short heartbeat, transfer-deadline and lease settings so that
// faults resolve within seconds. Both instances use `comm` (gloo | shm | auto).
std::string DisaggYaml(const std::string& model_dir, bool fault_timeouts,
                       absl::string_view comm = "gloo");

// The same deployment, shaped by `options`.
struct DisaggOptions {
  bool fault_timeouts = false;
  std::string comm = "gloo";
  // The generation instances: name and world size of each.
  std::vector<std::pair<std::string, int>> generation = {{"gen0", 4}};
  // Per generation rank.
  int generation_max_batch_size = 2;
  int generation_max_active_requests = 4;
  // transfer.transport of every instance (ucx | tcp | grpc); empty: the default.
  std::string transfer_transport;
};
std::string DisaggYaml(const std::string& model_dir, const DisaggOptions& options);

// The test's temporary directory.
std::string TestTmpDir();

// WorkerService.Stats of `instance` (through the router's list of instances).
absl::StatusOr<v1::StatsResponse> InstanceStats(const launcher::LocalDeployment& d,
                                                const std::string& instance);

// The last lines of the router's and every rank's log, for a failing test's output.
std::string LogTails(const launcher::LocalDeployment& d, int lines = 12);

// "" when every pool of every rank of `instance` is at rest (no block referenced by a
// request or a claim) and the audit found nothing; otherwise what is wrong.
std::string CheckAtRest(const launcher::LocalDeployment& d, const std::string& instance);

// A completions SSE stream (/v1/completions with stream: true), parsed.
struct SseCompletion {
  std::map<int, std::string> text;           // by choice index
  std::map<int, std::string> finish_reason;  // by choice index
  nlohmann::json usage;                      // the usage chunk's (null without one)
  nlohmann::json error;                      // the error event's (null without one)
  bool done = false;                         // the stream ended with [DONE]
};
SseCompletion ParseSseCompletion(absl::string_view body);

// The sum of the samples named `name` on the router's /metrics, over every label set
// (0 when there is none); -1 when /metrics cannot be read.
double RouterMetric(const launcher::LocalDeployment& d, absl::string_view name);

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_E2E_UTIL_H_

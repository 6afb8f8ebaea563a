// Helpers shared by the end-to-end tests.
#ifndef LOCKSTEP_TESTS_E2E_E2E_UTIL_H_
#define LOCKSTEP_TESTS_E2E_E2E_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "runtime/launcher/local_deployment.h"

namespace lockstep::e2e {

// Writes a tiny-moe model (and its draft) into `dir` unless one is there.
absl::Status EnsureTinyMoe(const std::string& dir);

// The `lockstep` binary in the test's runfiles (the test depends on //tools:lockstep).
std::string LockstepBinary();

// The deployment of the disaggregated tests: context DEP2 + generation DEP4 with
// max_batch_size 2 per rank, K = 3, unpaired draft pools, the audit on every step. With
// `fault_timeouts`, short heartbeat, transfer-deadline and lease settings so that
// faults resolve within seconds.
std::string DisaggYaml(const std::string& model_dir, bool fault_timeouts);

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

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_E2E_UTIL_H_

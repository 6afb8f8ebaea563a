// How cuda_launch_test shares its own time limit among its waits (make-model, the
// launcher's readiness, the requests, the stop), so that a slow step fails inside the
// limit with the launcher's log instead of being killed as a bare TIMEOUT.
//
// Pure functions of their arguments (CheckLimit reads the environment once per call).
#ifndef LOCKSTEP_TESTS_E2E_CUDA_LAUNCH_WAITS_H_
#define LOCKSTEP_TESTS_E2E_CUDA_LAUNCH_WAITS_H_

#include "absl/time/time.h"

namespace lockstep::e2e {

// Each wait, in the order the test makes them. Their sum plus `kReportReserve` is at
// most the limit they were split from.
struct LaunchWaits {
  // Left for printing logs and gtest's teardown after the last wait.
  static constexpr absl::Duration kReportReserve = absl::Seconds(10);

  absl::Duration make_model;     // `lockstep make-model` to exit
  absl::Duration ready;          // the launcher to write endpoints.json
  int launcher_ready_timeout_s;  // its --ready-timeout-s: it gives up (and logs why) first
  absl::Duration requests;       // all the OpenAI requests, every client's read included
  absl::Duration stop;           // the launcher to exit after SIGTERM
};

// Splits `limit`: make-model, the requests and the stop get bounded shares, readiness
// (the worker's CUDA start and graph capture) the rest.
LaunchWaits SplitLimit(absl::Duration limit);

// The test's own limit: LOCKSTEP_CHECK_TIMEOUT_S (device_check.sh sets it to the limit it
// runs the check under), else Bazel's TEST_TIMEOUT, else `fallback`.
absl::Duration CheckLimit(absl::Duration fallback);

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_CUDA_LAUNCH_WAITS_H_

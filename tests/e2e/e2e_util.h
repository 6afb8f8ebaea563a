// Helpers shared by the end-to-end tests.
#ifndef LOCKSTEP_TESTS_E2E_E2E_UTIL_H_
#define LOCKSTEP_TESTS_E2E_E2E_UTIL_H_

#include <string>

#include "absl/status/status.h"

namespace lockstep::e2e {

// Writes a tiny-moe model (and its draft) into `dir` unless one is there.
absl::Status EnsureTinyMoe(const std::string& dir);

// The `lockstep` binary in the test's runfiles (the test depends on //tools:lockstep).
std::string LockstepBinary();

// The test's temporary directory.
std::string TestTmpDir();

}  // namespace lockstep::e2e

#endif  // LOCKSTEP_TESTS_E2E_E2E_UTIL_H_

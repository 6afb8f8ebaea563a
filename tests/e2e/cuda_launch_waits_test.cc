#include "tests/e2e/cuda_launch_waits.h"

#include <cstdlib>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace lockstep::e2e {
namespace {

// Every wait is positive, the launcher gives up before the test does, and all of them
// with the report's reserve fit the limit (the check's 150 s, budget-cut ones, Bazel's).
TEST(CudaLaunchWaitsTest, WaitsFitTheLimit) {
  for (int limit_s : {15, 30, 60, 100, 150, 900}) {
    SCOPED_TRACE(limit_s);
    const absl::Duration limit = absl::Seconds(limit_s);
    const LaunchWaits waits = SplitLimit(limit);
    EXPECT_GT(waits.make_model, absl::ZeroDuration());
    EXPECT_GT(waits.requests, absl::ZeroDuration());
    EXPECT_GT(waits.stop, absl::ZeroDuration());
    EXPECT_GT(waits.ready, absl::ZeroDuration());
    EXPECT_GE(waits.launcher_ready_timeout_s, 1);
    EXPECT_LT(absl::Seconds(waits.launcher_ready_timeout_s), waits.ready);
    EXPECT_LE(
        waits.make_model + waits.ready + waits.requests + waits.stop + LaunchWaits::kReportReserve,
        limit);
  }
}

// At the check's 150 s, readiness (the worker's CUDA start) gets most of the time.
TEST(CudaLaunchWaitsTest, ReadinessGetsMostAtTheCheckLimit) {
  const LaunchWaits waits = SplitLimit(absl::Seconds(150));
  EXPECT_GE(waits.ready, absl::Seconds(60));
  EXPECT_GE(waits.requests, absl::Seconds(20));
}

TEST(CudaLaunchWaitsTest, LimitFromDeviceCheckThenBazel) {
  ASSERT_EQ(setenv("TEST_TIMEOUT", "900", 1), 0);
  ASSERT_EQ(setenv("LOCKSTEP_CHECK_TIMEOUT_S", "97", 1), 0);
  EXPECT_EQ(CheckLimit(absl::Seconds(150)), absl::Seconds(97));
  ASSERT_EQ(setenv("LOCKSTEP_CHECK_TIMEOUT_S", "x", 1), 0);
  EXPECT_EQ(CheckLimit(absl::Seconds(150)), absl::Seconds(900));
  ASSERT_EQ(unsetenv("LOCKSTEP_CHECK_TIMEOUT_S"), 0);
  ASSERT_EQ(unsetenv("TEST_TIMEOUT"), 0);
  EXPECT_EQ(CheckLimit(absl::Seconds(150)), absl::Seconds(150));
}

}  // namespace
}  // namespace lockstep::e2e

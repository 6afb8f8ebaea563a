#include "runtime/engine/device/cuda_support.h"

#include <cstdlib>

#include "runtime/engine/device_engine.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CudaSupportTest, SaysHowTheBinaryWasBuilt) {
#ifdef LOCKSTEP_WITH_CUDA
  EXPECT_TRUE(BuiltWithCuda());
#ifdef LOCKSTEP_CUDA_CPU
  EXPECT_TRUE(BuiltWithCudaCpu());
  ASSERT_EQ(setenv(kCudaCpuOkEnv, "1", 1), 0);
#else
  EXPECT_FALSE(BuiltWithCudaCpu());
#endif
  EXPECT_THAT(CudaEngineSupport(), IsOk());
#else
  EXPECT_FALSE(BuiltWithCudaCpu());
  EXPECT_FALSE(BuiltWithCuda());
  EXPECT_THAT(CudaEngineSupport(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without CUDA")));
#endif
}

#ifdef LOCKSTEP_CUDA_CPU
// CUDA on the CPU execution layer runs engine cuda only when asked to (tests).
TEST(CudaSupportTest, TheCpuExecutionLayerNeedsConsent) {
  ASSERT_EQ(unsetenv(kCudaCpuOkEnv), 0);
  EXPECT_THAT(CudaEngineSupport(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("LOCKSTEP_CUDA_CPU_OK=1")));
  ASSERT_EQ(setenv(kCudaCpuOkEnv, "0", 1), 0);
  EXPECT_THAT(CudaEngineSupport(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_EQ(setenv(kCudaCpuOkEnv, "1", 1), 0);
  EXPECT_THAT(CudaEngineSupport(), IsOk());
}
#endif

#ifndef LOCKSTEP_WITH_CUDA
// The default build links the stub: starting the CUDA engine says why it cannot.
TEST(CudaSupportTest, WithoutCudaTheEngineDoesNotStart) {
  DeviceEngineOptions options;
  options.model_dir = "/nonexistent";
  EXPECT_THAT(StartCudaEngine(options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without CUDA")));
}
#endif

}  // namespace
}  // namespace lockstep::engine

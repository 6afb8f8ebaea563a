#include "runtime/engine/cuda_support.h"

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
  EXPECT_THAT(CudaEngineSupport(), IsOk());
#else
  EXPECT_FALSE(BuiltWithCuda());
  EXPECT_THAT(CudaEngineSupport(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without CUDA")));
#endif
}

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

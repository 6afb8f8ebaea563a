#include "runtime/engine/cuda_support.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CudaSupportTest, SaysHowTheBinaryWasBuilt) {
#ifdef LOCKSTEP_WITH_CUDA
  EXPECT_TRUE(BuiltWithCuda());
  EXPECT_THAT(CudaEngineSupport(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("built with CUDA")));
#else
  EXPECT_FALSE(BuiltWithCuda());
  EXPECT_THAT(CudaEngineSupport(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                            HasSubstr("built without CUDA")));
#endif
}

}  // namespace
}  // namespace lockstep::engine

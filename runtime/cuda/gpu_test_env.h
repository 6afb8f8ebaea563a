// For GPU checks (gtest): a test that needs a device skips when none is usable, so
// `bazel test --config=cuda` passes on a machine without a GPU; under
// LOCKSTEP_REQUIRE_GPU=1 (set by tools/gpu/device_check.sh) it fails instead, so a GPU
// run never passes by skipping. Under --config=cuda_cpu the device is the CPU execution
// layer's (runtime/cuda/cpu), always there: a test that finds none fails, never skips.
//
//   TEST(FooTest, OnDevice) {
//     LOCKSTEP_SKIP_WITHOUT_GPU();
//     ...
//   }
#ifndef LOCKSTEP_RUNTIME_CUDA_GPU_TEST_ENV_H_
#define LOCKSTEP_RUNTIME_CUDA_GPU_TEST_ENV_H_

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::testing {

// OK when device 0 is usable; otherwise why not (no driver, no device).
absl::Status DeviceAvailable();

// True when LOCKSTEP_REQUIRE_GPU is "1", and always on the CPU execution layer.
bool GpuRequired();

}  // namespace lockstep::cuda::testing

#define LOCKSTEP_SKIP_WITHOUT_GPU()                                                        \
  do {                                                                                     \
    if (const ::absl::Status lockstep_gpu_ = ::lockstep::cuda::testing::DeviceAvailable(); \
        !lockstep_gpu_.ok()) {                                                             \
      if (::lockstep::cuda::testing::GpuRequired()) {                                      \
        FAIL() << "LOCKSTEP_REQUIRE_GPU=1 but " << lockstep_gpu_;                          \
      }                                                                                    \
      GTEST_SKIP() << lockstep_gpu_;                                                       \
    }                                                                                      \
  } while (false)

#endif  // LOCKSTEP_RUNTIME_CUDA_GPU_TEST_ENV_H_

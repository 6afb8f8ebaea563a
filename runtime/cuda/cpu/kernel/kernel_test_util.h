// Helpers for the kernel execution tests: a stream per test, launching and waiting, the
// fault a grid reported (its sticky error then cleared, so a test can check several),
// and the schedule under test (tests run under forward, reverse and a random seed).
#ifndef LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_KERNEL_TEST_UTIL_H_
#define LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_KERNEL_TEST_UTIL_H_

#include <cuda_runtime.h>

#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/kernel/block_executor.h"
#include "runtime/cuda/cpu/kernel/schedule.h"

namespace lockstep::cuda_cpu::kernel {

// The schedules every schedule-parameterized test runs under.
inline const char* const kTestSchedules[] = {"forward", "reverse", "random:1", "random:77"};

class KernelTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    absl::StatusOr<Schedule> schedule = ParseSchedule(GetParam());
    ASSERT_TRUE(schedule.ok()) << schedule.status();
    SetProcessSchedule(*schedule);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }

  void TearDown() override {
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    SetProcessSchedule(Schedule{});
  }

  // Waits for the stream. A fault's message goes to fault_ and its sticky error is
  // cleared; returns the error.
  cudaError_t Sync() {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) {
      fault_ = LastKernelFault();
      testing::ClearStickyErrors();
      cudaGetLastError();
    }
    return e;
  }

  cudaStream_t stream_ = nullptr;
  std::string fault_;
};

}  // namespace lockstep::cuda_cpu::kernel

#endif  // LOCKSTEP_RUNTIME_CUDA_CPU_KERNEL_KERNEL_TEST_UTIL_H_

// Kernel launches: the driver's configuration checks (block and grid limits, empty
// grids, the dynamic shared memory limit and cudaFuncSetAttribute raising it) fail the
// launch synchronously and not stickily; arguments are converted to the kernel's
// parameter types and copied at the launch; atomics across blocks.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/kernel/kernel_test_util.h"
// The kernels below are written as .cu code.
#include "runtime/cuda/cpu/kernel/prelude.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

__global__ void Count(int* counter) { atomicAdd(counter, 1); }

__global__ void UsesSharedMemory(int* counter) {
  ::lockstep::cuda_cpu::DynamicShared<char>()[0] = 1;
  if (threadIdx.x == 0) atomicAdd(counter, 1);
}

__global__ void Widen(int64_t a, double b, unsigned char c, int64_t* out) {
  out[0] = a;
  out[1] = static_cast<int64_t>(b * 2);
  out[2] = c;
}

using LaunchTest = KernelTest;

TEST_P(LaunchTest, BadConfigurationsAreLastErrorsNotSticky) {
  int counter = 0;
  struct Case {
    dim3 grid;
    dim3 block;
  };
  const Case bad[] = {
      {dim3(1), dim3(1025)},         {dim3(1), dim3(1, 1025)},   {dim3(1), dim3(1, 1, 65)},
      {dim3(1), dim3(32, 32, 2)},    {dim3(1), dim3(0)},         {dim3(0), dim3(32)},
      {dim3(1, 0), dim3(32)},        {dim3(1, 65536), dim3(32)}, {dim3(1, 1, 65536), dim3(32)},
      {dim3(0x80000000u), dim3(32)},
  };
  for (const Case& c : bad) {
    Launch(Count, "Count", c.grid, c.block, 0, stream_)(&counter);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration)
        << c.grid.x << "," << c.grid.y << "," << c.grid.z << " x " << c.block.x << "," << c.block.y
        << "," << c.block.z;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(counter, 0);
  // The largest legal shapes run.
  Launch(Count, "Count", dim3(2, 3), dim3(1024), 0, stream_)(&counter);
  Launch(Count, "Count", dim3(1), dim3(16, 1, 64), 0, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(counter, 6 * 1024 + 1024);
}

TEST_P(LaunchTest, DynamicSharedMemoryLimitAndItsAttribute) {
  int counter = 0;
  // Back to the default (an earlier instance of this test raised it).
  ASSERT_EQ(cudaFuncSetAttribute(UsesSharedMemory, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 48 * 1024),
            cudaSuccess);
  Launch(UsesSharedMemory, "UsesSharedMemory", 1, 32, 48 * 1024, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  Launch(UsesSharedMemory, "UsesSharedMemory", 1, 32, 48 * 1024 + 1, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

  EXPECT_EQ(cudaFuncSetAttribute(UsesSharedMemory, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 232448 + 1),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(UsesSharedMemory, cudaFuncAttributeMaxDynamicSharedMemorySize, -1),
            cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(UsesSharedMemory, cudaFuncAttributeMaxDynamicSharedMemorySize, 100000),
      cudaSuccess);
  Launch(UsesSharedMemory, "UsesSharedMemory", 1, 32, 100000, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  Launch(UsesSharedMemory, "UsesSharedMemory", 1, 32, 100001, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  // The attribute is the kernel's own: another kernel keeps the 48 KiB default.
  Launch(Count, "Count", 1, 32, 48 * 1024 + 1, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  ASSERT_EQ(
      cudaFuncSetAttribute(UsesSharedMemory, cudaFuncAttributeMaxDynamicSharedMemorySize, 232448),
      cudaSuccess);
  Launch(UsesSharedMemory, "UsesSharedMemory", 1, 32, 232448, stream_)(&counter);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(counter, 3);
  EXPECT_EQ(cudaFuncSetAttribute(static_cast<const void*>(nullptr),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, 0),
            cudaErrorInvalidDeviceFunction);
}

TEST_P(LaunchTest, ArgumentsAreConvertedAndCopiedAtTheLaunch) {
  std::vector<int64_t> out(3, 0);
  int a = -5;
  double b = 10.25;
  Launch(Widen, "Widen", 1, 1, 0, stream_)(a, b, 300 % 256, out.data());
  a = 1;  // after the launch: the kernel has its own copy
  b = 0;
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(out, (std::vector<int64_t>{-5, 20, 44}));
}

TEST_P(LaunchTest, AtomicsAcrossBlocks) {
  int counter = 0;
  Launch(Count, "Count", 50, 96, 0, stream_)(&counter);
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(counter, 50 * 96);
}

INSTANTIATE_TEST_SUITE_P(Schedules, LaunchTest, ::testing::Values("forward", "random:3"));

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel

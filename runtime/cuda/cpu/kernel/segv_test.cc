// The SIGSEGV report (segv_handler.h): an access past a device allocation's end, into
// its guard page, names the allocation, the offset and the kernel thread; a use after
// cudaFree names the freed allocation; a host access past a pinned allocation names it
// with no kernel. Each dies of SIGSEGV after the report (death tests).
#include <cuda_runtime.h>

#include <csignal>
#include <cstdint>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/kernel/kernel_test_util.h"
// The kernels below are written as .cu code.
#include "runtime/cuda/cpu/kernel/prelude.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

// Thread `reader` of block 1 reads element `index` of `data`.
__global__ void ReadOne(const float* data, int index, int reader, float* out) {
  if (blockIdx.x == 1 && threadIdx.x == reader) out[0] = data[index];
}

using SegvTest = KernelTest;

// The death tests re-run the binary up to the statement (the streams' worker threads
// do not survive a plain fork).
TEST_P(SegvTest, AKernelReadPastTheEndNamesTheAllocationOffsetAndThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* data = nullptr;
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 1000 * sizeof(float)), cudaSuccess);  // 4000 bytes: 96 of padding
  ASSERT_EQ(cudaMalloc(&out, sizeof(float)), cudaSuccess);
  EXPECT_EXIT(
      {
        Launch(ReadOne, "ReadOne", dim3(2), dim3(64), 0, stream_)(data, 1024 + 8, 5, out);
        cudaStreamSynchronize(stream_);
      },
      ::testing::KilledBySignal(SIGSEGV),
      "SIGSEGV at address 0x[0-9a-f]+ in kernel ReadOne block \\(1,0,0\\) thread \\(5,0,0\\): "
      "128 bytes past the end of the 4000-byte device allocation at 0x[0-9a-f]+ \\(device 0\\), "
      "in its padding or guard page");
  // Inside the allocation's 256-byte rounding nothing faults (the poison shows instead).
  Launch(ReadOne, "ReadOne", dim3(2), dim3(64), 0, stream_)(data, 1010, 5, out);
  EXPECT_EQ(Sync(), cudaSuccess) << fault_;
  cudaFree(data);
  cudaFree(out);
}

TEST_P(SegvTest, AUseAfterFreeNamesTheFreedAllocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 512), cudaSuccess);
  ASSERT_EQ(cudaFree(data), cudaSuccess);
  volatile const float* stale = data;
  EXPECT_EXIT({ (void)stale[2]; }, ::testing::KilledBySignal(SIGSEGV),
              "SIGSEGV at address 0x[0-9a-f]+: offset 8 of the freed 512-byte device allocation "
              "at 0x[0-9a-f]+ \\(device 0\\): a use after free");
}

TEST_P(SegvTest, AHostWritePastPinnedMemoryNamesIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  char* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);
  volatile char* p = pinned;
  EXPECT_EXIT({ p[4096 + 100] = 1; }, ::testing::KilledBySignal(SIGSEGV),
              "SIGSEGV at address 0x[0-9a-f]+: 100 bytes past the end of the 4096-byte "
              "pinned host allocation");
  cudaFreeHost(pinned);
}

INSTANTIATE_TEST_SUITE_P(Schedules, SegvTest, ::testing::Values("forward"));

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel

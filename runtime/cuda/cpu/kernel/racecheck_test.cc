// The race checker (racecheck.h) on kernels compiled with the load/store callbacks (this
// file's copts): a missing __syncthreads between threads, a missing __syncwarp between
// lanes, races on static __shared__ and on global memory are faults naming both
// threads; barriers, __syncwarp and atomics order accesses; with the check off the
// same kernels run unchecked.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cpu/kernel/kernel_test_util.h"
#include "runtime/cuda/cpu/kernel/racecheck.h"
// The kernels below are written as .cu code.
#include "runtime/cuda/cpu/kernel/prelude.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

__global__ void Shift(int* out, bool barrier) {
  int* s = ::lockstep::cuda_cpu::DynamicShared<int>();
  const int t = threadIdx.x;
  s[t] = 100 + t;
  if (barrier) __syncthreads();
  out[t] = t > 0 ? s[t - 1] : -1;
}

__global__ void Publish(int* out, bool syncwarp) {
  __shared__ int slot[2];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) slot[warp] = 7 + warp;
  if (syncwarp) __syncwarp();
  out[threadIdx.x] = slot[warp];
}

// Thread 1 reads the global element thread 0 writes, ordered or not by a barrier.
__global__ void GlobalHandoff(int* data, bool barrier) {
  if (threadIdx.x == 0) data[0] = 5;
  if (barrier) __syncthreads();
  if (threadIdx.x == 1) data[1] = data[0];
}

__global__ void AtomicCount(int* counter) {
  atomicAdd(counter, 1);
  atomicMax(counter + 1, static_cast<int>(threadIdx.x));
}

class RaceCheckTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    SetRaceCheckEnabled(true);
  }
  void TearDown() override {
    SetRaceCheckEnabled(false);
    KernelTest::TearDown();
  }
};

TEST_P(RaceCheckTest, MissingBarrierIsReported) {
  std::vector<int> out(64, 0);
  Launch(Shift, "Shift", 1, 64, 64 * sizeof(int), stream_)(out.data(), false);
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("kernel Shift block (0,0,0) thread ("));
  // Whichever of the two ran first: a read after the write or a write after the read.
  EXPECT_THAT(fault_, AnyOf(HasSubstr("racecheck: reads dynamic shared memory byte"),
                            HasSubstr("racecheck: writes dynamic shared memory byte")));

  Launch(Shift, "Shift", 2, 64, 64 * sizeof(int), stream_)(out.data(), true);
  EXPECT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(out[10], 109);
}

TEST_P(RaceCheckTest, WarpHandoffNeedsASyncwarp) {
  std::vector<int> out(64, 0);
  Launch(Publish, "Publish", 1, 64, 0, stream_)(out.data(), true);
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(out[40], 8);
  Launch(Publish, "Publish", 1, 64, 0, stream_)(out.data(), false);
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("racecheck"));
}

TEST_P(RaceCheckTest, GlobalMemoryWithinABlock) {
  std::vector<int> data(2, 0);
  Launch(GlobalHandoff, "GlobalHandoff", 1, 2, 0, stream_)(data.data(), true);
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(data[1], 5);
  Launch(GlobalHandoff, "GlobalHandoff", 1, 2, 0, stream_)(data.data(), false);
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("racecheck"));
  EXPECT_THAT(fault_, HasSubstr("address 0x"));
}

TEST_P(RaceCheckTest, AtomicsDoNotRace) {
  std::vector<int> counter(2, 0);
  Launch(AtomicCount, "AtomicCount", 2, 64, 0, stream_)(counter.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(counter[0], 128);
  EXPECT_EQ(counter[1], 63);
}

TEST_P(RaceCheckTest, OffMeansUnchecked) {
  SetRaceCheckEnabled(false);
  std::vector<int> data(2, 0);
  Launch(GlobalHandoff, "GlobalHandoff", 1, 2, 0, stream_)(data.data(), false);
  EXPECT_EQ(Sync(), cudaSuccess) << fault_;
}

INSTANTIATE_TEST_SUITE_P(Schedules, RaceCheckTest, ::testing::ValuesIn(kTestSchedules));

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel

// __syncthreads on the block executor: a barrier orders the threads' shared-memory
// writes before the reads after it under every schedule; without it the reverse
// schedule shows the bug the forward one hides; exited threads count as arrived;
// divergent barriers and deadlocks are faults naming the wait sites; dynamic shared
// memory starts as 0xFF poison; the built-in variables and static __shared__ are per
// block. Every test runs under forward, reverse and random schedules.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cpu/kernel/kernel_test_util.h"
// The kernels below are written as .cu code: the prelude comes after gtest so that no
// later <assert.h> brings back the host's assert.
#include "runtime/cuda/cpu/kernel/prelude.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

using ::testing::HasSubstr;

// out[t] = (value of thread t - 1), passed through dynamic shared memory.
__global__ void ShiftWithBarrier(int* out) {
  int* s = ::lockstep::cuda_cpu::DynamicShared<int>();
  const int t = threadIdx.x;
  s[t] = 100 + t;
  __syncthreads();
  out[t] = t > 0 ? s[t - 1] : -1;
}

// The same with the barrier forgotten.
__global__ void ShiftWithoutBarrier(int* out) {
  int* s = ::lockstep::cuda_cpu::DynamicShared<int>();
  const int t = threadIdx.x;
  s[t] = 100 + t;
  out[t] = t > 0 ? s[t - 1] : -1;
}

using BarrierTest = KernelTest;

std::vector<int> ExpectedShift(int n) {
  std::vector<int> expected(n);
  for (int t = 0; t < n; ++t) expected[t] = t > 0 ? 100 + t - 1 : -1;
  return expected;
}

TEST_P(BarrierTest, BarrierOrdersSharedWrites) {
  std::vector<int> out(128, 0);
  Launch(ShiftWithBarrier, "ShiftWithBarrier", 1, 128, 128 * sizeof(int), stream_)(out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  EXPECT_EQ(out, ExpectedShift(128));
}

TEST(MissingBarrierTest, ForwardHidesItReverseShowsIt) {
  for (const char* name : {"forward", "reverse"}) {
    SetProcessSchedule(*ParseSchedule(name));
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    std::vector<int> out(128, 0);
    Launch(ShiftWithoutBarrier, "ShiftWithoutBarrier", 1, 128, 128 * sizeof(int),
           stream)(out.data());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
    if (std::strcmp(name, "forward") == 0) {
      EXPECT_EQ(out, ExpectedShift(128)) << "forward runs thread t - 1 before thread t";
    } else {
      // Every thread read its neighbour's slot before the neighbour ran: 0xFF poison.
      EXPECT_EQ(out[1], -1);
      EXPECT_NE(out, ExpectedShift(128));
    }
  }
  SetProcessSchedule(Schedule{});
}

// Warps 2 and 3 leave; the rest meet at a barrier, which the exited threads do not hold.
__global__ void BarrierAfterExit(int* out) {
  __shared__ int slots[64];
  const int t = threadIdx.x;
  if (t >= 64) return;
  slots[t] = t * 3;
  __syncthreads();
  out[t] = slots[63 - t];
}

TEST_P(BarrierTest, ExitedThreadsCountAsArrived) {
  std::vector<int> out(128, -7);
  Launch(BarrierAfterExit, "BarrierAfterExit", 1, 128, 0, stream_)(out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[t], (63 - t) * 3) << t;
  for (int t = 64; t < 128; ++t) EXPECT_EQ(out[t], -7) << t;
}

// Several barriers in a loop: a block-wide prefix sum (Hillis-Steele).
__global__ void PrefixSum(const int* in, int* out) {
  __shared__ int buffers[2][256];
  const int t = threadIdx.x;
  int from = 0;
  buffers[from][t] = in[t];
  __syncthreads();
  for (int offset = 1; offset < static_cast<int>(blockDim.x); offset *= 2) {
    const int v = buffers[from][t] + (t >= offset ? buffers[from][t - offset] : 0);
    buffers[1 - from][t] = v;
    from = 1 - from;
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + t] = buffers[from][t];
}

TEST_P(BarrierTest, PrefixSumOverSeveralBlocks) {
  std::vector<int> in(256);
  for (int i = 0; i < 256; ++i) in[i] = (i * 7) % 13 - 5;
  std::vector<int> out(3 * 256, 0);
  Launch(PrefixSum, "PrefixSum", 3, 256, 0, stream_)(in.data(), out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (int b = 0; b < 3; ++b) {
    int sum = 0;
    for (int i = 0; i < 256; ++i) {
      sum += in[i];
      ASSERT_EQ(out[b * 256 + i], sum) << "block " << b << " thread " << i;
    }
  }
}

__global__ void DivergentBarrier() {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}

TEST_P(BarrierTest, DivergentBarrierIsAFault) {
  Launch(DivergentBarrier, "DivergentBarrier", 2, 64, 0, stream_)();
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("kernel DivergentBarrier block ("));
  EXPECT_THAT(fault_, HasSubstr("divergent __syncthreads"));
  EXPECT_THAT(fault_, HasSubstr("barrier_test.cc:"));
  // The device works again once the sticky error is cleared.
  Launch(DivergentBarrier, "DivergentBarrier", 1, 1, 0, stream_)();
  EXPECT_EQ(Sync(), cudaSuccess) << fault_;
}

// Thread 0 waits at a __syncwarp for lane 1, which waits at __syncthreads for thread 0.
__global__ void Deadlock() {
  if (threadIdx.x == 0) {
    __syncwarp(0x3);
  } else {
    __syncthreads();
  }
}

TEST_P(BarrierTest, DeadlockIsReportedWithEveryWaitSite) {
  Launch(Deadlock, "Deadlock", 1, 40, 0, stream_)();
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("kernel Deadlock: deadlock: no thread can run"));
  EXPECT_THAT(fault_, HasSubstr("threads 0 wait at __syncwarp(mask 0x00000003) at"));
  EXPECT_THAT(fault_, HasSubstr("threads 1-39 wait at __syncthreads at"));
}

__global__ void ReadPoison(uint32_t* out) {
  const uint32_t* s = ::lockstep::cuda_cpu::DynamicShared<uint32_t>();
  out[threadIdx.x] = s[threadIdx.x];
  float* f = ::lockstep::cuda_cpu::DynamicShared<float>();
  __syncthreads();
  f[threadIdx.x] = 1.0f;
}

TEST_P(BarrierTest, DynamicSharedMemoryStartsAsPoisonInEachBlock) {
  std::vector<uint32_t> out(32, 0);
  // Block 0 writes its shared memory; block 1 must see poison again.
  Launch(ReadPoison, "ReadPoison", 2, 32, 32 * sizeof(float), stream_)(out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (uint32_t v : out) {
    EXPECT_EQ(v, 0xFFFFFFFFu);
    float f;
    std::memcpy(&f, &v, sizeof(f));
    EXPECT_TRUE(std::isnan(f));
  }
}

// Each thread writes its coordinates; a block-wide static __shared__ sum per block.
__global__ void Coordinates(uint32_t* out, int* sums) {
  __shared__ int sum;
  const uint32_t block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  uint32_t* o = out + 4 * (block * threads + thread);
  o[0] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
  o[1] = blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z;
  o[2] = blockDim.x + 10 * blockDim.y + 100 * blockDim.z;
  o[3] = gridDim.x + 10 * gridDim.y + 100 * gridDim.z;
  if (thread == 0) sum = 0;
  __syncthreads();
  atomicAdd(&sum, static_cast<int>(block));
  __syncthreads();
  if (thread == threads - 1) sums[block] = sum;
}

TEST_P(BarrierTest, BuiltinsAndStaticSharedArePerBlock) {
  const dim3 grid(3, 2, 2);
  const dim3 block(4, 3, 2);
  std::vector<uint32_t> out(12 * 24 * 4, 0);
  std::vector<int> sums(12, -1);
  Launch(Coordinates, "Coordinates", grid, block, 0, stream_)(out.data(), sums.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (uint32_t bz = 0; bz < 2; ++bz) {
    for (uint32_t by = 0; by < 2; ++by) {
      for (uint32_t bx = 0; bx < 3; ++bx) {
        const uint32_t b = bx + 3 * (by + 2 * bz);
        EXPECT_EQ(sums[b], static_cast<int>(24 * b));
        for (uint32_t tz = 0; tz < 2; ++tz) {
          for (uint32_t ty = 0; ty < 3; ++ty) {
            for (uint32_t tx = 0; tx < 4; ++tx) {
              const uint32_t* o = &out[4 * (b * 24 + tx + 4 * (ty + 3 * tz))];
              EXPECT_EQ(o[0], tx + 10 * ty + 100 * tz);
              EXPECT_EQ(o[1], bx + 10 * by + 100 * bz);
              EXPECT_EQ(o[2], 4u + 30 + 200);
              EXPECT_EQ(o[3], 3u + 20 + 200);
            }
          }
        }
      }
    }
  }
}

__global__ void Trap(int bad_block) {
  if (blockIdx.x == static_cast<unsigned>(bad_block) && threadIdx.x == 5) __trap();
}

TEST_P(BarrierTest, TrapIsAStickyLaunchFailureNamingTheThread) {
  Launch(Trap, "Trap", 4, 32, 0, stream_)(2);
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("kernel Trap block (2,0,0) thread (5,0,0): __trap()"));
  EXPECT_THAT(fault_, HasSubstr("barrier_test.cc:"));
}

__global__ void DeviceAssert(const int* values) { assert(values[threadIdx.x] >= 0); }

TEST_P(BarrierTest, FailedDeviceAssertIsCudaErrorAssert) {
  std::vector<int> values(32, 1);
  values[17] = -1;
  Launch(DeviceAssert, "DeviceAssert", 1, 32, 0, stream_)(values.data());
  EXPECT_EQ(Sync(), cudaErrorAssert);
  EXPECT_THAT(fault_, HasSubstr("thread (17,0,0): device assert `values[threadIdx.x] >= 0`"));
}

INSTANTIATE_TEST_SUITE_P(Schedules, BarrierTest, ::testing::ValuesIn(kTestSchedules));

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel

// Warp shuffles, votes and __syncwarp on the block executor: CUDA's results for every
// lane (widths and edges included); a reduction among the warps still present after a
// warp-uniform early return completes; a masked lane that exited, does not exist or is
// read outside the mask is a fault naming the kernel, block, thread and line. Every
// test runs under forward, reverse and random schedules.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cpu/kernel/kernel_test_util.h"
// The kernels below are written as .cu code.
#include "runtime/cuda/cpu/kernel/prelude.h"

namespace lockstep::cuda_cpu::kernel {
namespace {

using ::testing::HasSubstr;

float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One warp per row; warps past `rows` return at once (as HeadRmsNormKernel does).
__global__ void RowSums(const float* x, int rows, float* sums) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  float s = 0.0f;
  for (int i = lane; i < 100; i += 32) s += x[row * 100 + i];
  s = WarpSum(s);
  if (lane == 0) sums[row] = s;
}

using WarpOpsTest = KernelTest;

TEST_P(WarpOpsTest, XorReductionAmongThePresentWarps) {
  const int rows = 6;  // two blocks of 4 warps: the second block's last 2 warps leave
  std::vector<float> x(rows * 100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17);
  std::vector<float> sums(8, -1.0f);
  Launch(RowSums, "RowSums", 2, 128, 0, stream_)(x.data(), rows, sums.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (int r = 0; r < rows; ++r) {
    float expected = 0;
    for (int i = 0; i < 100; ++i) expected += x[r * 100 + i];
    EXPECT_EQ(sums[r], expected) << r;  // small integers: exact in any order
  }
  EXPECT_EQ(sums[6], -1.0f);
}

// Per lane: [shfl from lane 3, up 1, down 2, xor 1, shfl width 8 from 5, up 3 width 8,
// down 3 width 8, xor 4 width 4, ballot, any, all, int max via xor].
__global__ void AllOps(int* out) {
  const int lane = threadIdx.x;
  const int v = 100 + lane;
  int* o = out + lane * 12;
  o[0] = __shfl_sync(0xffffffffu, v, 3);
  o[1] = __shfl_up_sync(0xffffffffu, v, 1);
  o[2] = __shfl_down_sync(0xffffffffu, v, 2);
  o[3] = __shfl_xor_sync(0xffffffffu, v, 1);
  o[4] = __shfl_sync(0xffffffffu, v, 5, 8);
  o[5] = __shfl_up_sync(0xffffffffu, v, 3, 8);
  o[6] = __shfl_down_sync(0xffffffffu, v, 3, 8);
  o[7] = __shfl_xor_sync(0xffffffffu, v, 4, 4);
  o[8] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  o[9] = __any_sync(0xffffffffu, lane == 31);
  o[10] = __all_sync(0xffffffffu, lane < 31);
  int m = (lane * 37) % 32;
  for (int offset = 16; offset > 0; offset /= 2)
    m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  o[11] = m;
}

TEST_P(WarpOpsTest, ShufflesAndVotesGiveEveryLaneCudasResult) {
  std::vector<int> out(32 * 12, 0);
  Launch(AllOps, "AllOps", 1, 32, 0, stream_)(out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  unsigned ballot = 0;
  for (int lane = 0; lane < 32; lane += 3) ballot |= 1u << lane;
  for (int lane = 0; lane < 32; ++lane) {
    const int* o = &out[lane * 12];
    const int seg8 = lane / 8 * 8;
    EXPECT_EQ(o[0], 103) << lane;
    EXPECT_EQ(o[1], lane >= 1 ? 100 + lane - 1 : 100 + lane) << lane;
    EXPECT_EQ(o[2], lane + 2 < 32 ? 100 + lane + 2 : 100 + lane) << lane;
    EXPECT_EQ(o[3], 100 + (lane ^ 1)) << lane;
    EXPECT_EQ(o[4], 100 + seg8 + 5) << lane;
    EXPECT_EQ(o[5], lane - seg8 >= 3 ? 100 + lane - 3 : 100 + lane) << lane;
    EXPECT_EQ(o[6], lane - seg8 + 3 < 8 ? 100 + lane + 3 : 100 + lane) << lane;
    // xor 4 at width 4: a lane of an earlier segment may be read, a later one gives the
    // lane's own value (CUDA's rule; PTX's shfl.bfly against the segment's last lane).
    EXPECT_EQ(o[7], (lane ^ 4) < lane / 4 * 4 + 4 ? 100 + (lane ^ 4) : 100 + lane) << lane;
    EXPECT_EQ(static_cast<unsigned>(o[8]), ballot) << lane;
    EXPECT_EQ(o[9], 1) << lane;
    EXPECT_EQ(o[10], 0) << lane;
    EXPECT_EQ(o[11], 31) << lane;
  }
}

// Lanes 0-15 shuffle among themselves while 16-31 do something else.
__global__ void HalfWarp(float* out) {
  const int lane = threadIdx.x;
  if (lane < 16) {
    out[lane] = __shfl_xor_sync(0x0000ffffu, static_cast<float>(lane), 8);
  } else {
    __syncwarp(0xffff0000u);
    out[lane] = -1.0f;
  }
}

TEST_P(WarpOpsTest, PartialMasksCompleteAmongTheirLanes) {
  std::vector<float> out(32, 0.0f);
  Launch(HalfWarp, "HalfWarp", 1, 32, 0, stream_)(out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (int lane = 0; lane < 16; ++lane) EXPECT_EQ(out[lane], static_cast<float>(lane ^ 8));
  for (int lane = 16; lane < 32; ++lane) EXPECT_EQ(out[lane], -1.0f);
}

// Lane 5 leaves before a full-mask shuffle.
__global__ void ExitedLane(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = WarpSum(1.0f);
}

TEST_P(WarpOpsTest, AnExitedMaskedLaneIsAFault) {
  std::vector<float> out(64, 0.0f);
  Launch(ExitedLane, "ExitedLane", 1, 64, 0, stream_)(out.data());
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("kernel ExitedLane block (0,0,0) thread ("));
  EXPECT_THAT(fault_, HasSubstr("__shfl_xor_sync mask 0xffffffff names lane 5 (thread (5,0,0))"));
  EXPECT_THAT(fault_, HasSubstr("exited"));
  EXPECT_THAT(fault_, HasSubstr("warp_ops_test.cc:"));
}

// Lane 5 leaves before the others reach the shuffle under every schedule (the barrier
// waits for the live threads only), so no lane waits when it exits: the lanes' arrivals
// must find it.
__global__ void ExitedBeforeTheOthersArrive(float* out) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  out[threadIdx.x] = WarpSum(1.0f);
}

TEST_P(WarpOpsTest, ALaneThatExitedBeforeTheOthersArrivedIsAFault) {
  std::vector<float> out(32, 0.0f);
  Launch(ExitedBeforeTheOthersArrive, "ExitedBeforeTheOthersArrive", 1, 32, 0, stream_)(out.data());
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("__shfl_xor_sync mask 0xffffffff names lane 5 (thread (5,0,0)), "
                                "which has exited"));
}

// A block of 48 threads: its second warp has 16 lanes, but shuffles with a full mask.
__global__ void MissingLanes(float* out) { out[threadIdx.x] = WarpSum(1.0f); }

TEST_P(WarpOpsTest, AMaskNamingAMissingLaneIsAFault) {
  std::vector<float> out(48, 0.0f);
  Launch(MissingLanes, "MissingLanes", 1, 48, 0, stream_)(out.data());
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("names lane 16, which does not exist (the block has 48 threads)"));
}

__global__ void ReadOutsideMask(int* out) {
  if (threadIdx.x < 8) out[threadIdx.x] = __shfl_sync(0xffu, 1, 9);
}

TEST_P(WarpOpsTest, ReadingALaneOutsideTheMaskIsAFault) {
  std::vector<int> out(32, 0);
  Launch(ReadOutsideMask, "ReadOutsideMask", 1, 32, 0, stream_)(out.data());
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("reads lane 9, which mask 0x000000ff leaves out"));
}

__global__ void NotInOwnMask() { __syncwarp(0x1u); }

TEST_P(WarpOpsTest, ALaneOutsideItsOwnMaskIsAFault) {
  Launch(NotInOwnMask, "NotInOwnMask", 1, 2, 0, stream_)();
  EXPECT_EQ(Sync(), cudaErrorLaunchFailure);
  EXPECT_THAT(fault_, HasSubstr("thread (1,0,0): __syncwarp mask 0x00000001 does not name the "
                                "calling lane 1"));
}

// Lane 0 of each warp writes, __syncwarp, every lane reads (MoeRouteKernel's pattern).
__global__ void SyncwarpPublishes(int* out) {
  __shared__ int slot[4];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) slot[warp] = 1000 + warp;
  __syncwarp();
  out[threadIdx.x] = slot[warp];
}

TEST_P(WarpOpsTest, SyncwarpOrdersTheWarpsLanes) {
  std::vector<int> out(128, 0);
  Launch(SyncwarpPublishes, "SyncwarpPublishes", 1, 128, 0, stream_)(out.data());
  ASSERT_EQ(Sync(), cudaSuccess) << fault_;
  for (int t = 0; t < 128; ++t) EXPECT_EQ(out[t], 1000 + t / 32) << t;
}

INSTANTIATE_TEST_SUITE_P(Schedules, WarpOpsTest, ::testing::ValuesIn(kTestSchedules));

}  // namespace
}  // namespace lockstep::cuda_cpu::kernel

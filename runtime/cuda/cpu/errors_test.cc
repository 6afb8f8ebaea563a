// Errors: a failed stream op makes its device's error sticky (every later call
// returns it, other devices are unaffected, later work does not run); launch errors
// are the calling thread's last error only.
#include <string>
#include <thread>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/faults.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

class ErrorsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    testing::ClearStickyErrors();
    cudaGetLastError();
    cudaSetDevice(0);
  }
};

TEST_F(ErrorsTest, AFaultingOpMakesTheDeviceSticky) {
  ASSERT_EQ(cudaSetDevice(5), cudaSuccess);
  ScopedStream stream;
  bool later_ran = false;
  Gate gate;  // both ops are enqueued before the first runs
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel Faults", [] { return cudaErrorIllegalAddress; }), cudaSuccess);
  ASSERT_EQ(Enqueue(stream, "kernel Later",
                    [&] {
                      later_ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  gate.Open();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorIllegalAddress);
  EXPECT_FALSE(later_ran);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(Enqueue(stream, "kernel After", [] { return cudaSuccess; }), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // not cleared by reading
  cudaStream_t second;
  ASSERT_EQ(cudaStreamCreate(&second), cudaErrorIllegalAddress);
  // Another device is unaffected.
  ASSERT_EQ(cudaSetDevice(4), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(5), cudaErrorIllegalAddress);  // sets it, reports the error
}

TEST_F(ErrorsTest, SetStickyErrorFromAnOpKeepsTheFirst) {
  ASSERT_EQ(cudaSetDevice(5), cudaSuccess);
  ScopedStream stream;
  ASSERT_EQ(Enqueue(stream, "kernel Assert",
                    [] {
                      SetStickyError(cudaErrorAssert, "kernel Assert, block (0,0,0)");
                      return cudaErrorAssert;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorAssert);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorAssert);
}

TEST_F(ErrorsTest, LastErrorIsPerThreadAndCleared) {
  SetLastError(cudaErrorInvalidConfiguration);
  cudaError_t other = cudaErrorUnknown;
  std::thread([&] { other = cudaPeekAtLastError(); }).join();
  EXPECT_EQ(other, cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(ErrorsTest, NamesAndDescriptions) {
  EXPECT_EQ(std::string(cudaGetErrorName(cudaErrorNotReady)), "cudaErrorNotReady");
  EXPECT_EQ(std::string(cudaGetErrorName(cudaErrorStreamCaptureInvalidated)),
            "cudaErrorStreamCaptureInvalidated");
  EXPECT_EQ(std::string(cudaGetErrorString(cudaErrorMemoryAllocation)), "out of memory");
  EXPECT_EQ(std::string(cudaGetErrorName(static_cast<cudaError_t>(12345))), "cudaErrorUnknown");
}

}  // namespace
}  // namespace lockstep::cuda_cpu

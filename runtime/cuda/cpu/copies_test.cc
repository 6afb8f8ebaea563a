// Copies follow CUDA's API synchronisation behaviour: an async copy from pinned memory
// reads the source when the stream gets there, from pageable memory at the call; a
// copy to pageable memory and cudaMemcpy return once done; device-side ranges must
// lie inside one allocation.
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

class CopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaMalloc(&device_, sizeof(int)), cudaSuccess);
    ASSERT_EQ(cudaMallocHost(&pinned_, sizeof(int)), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaFree(device_), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(pinned_), cudaSuccess);
  }
  // What the device holds, read back synchronously.
  int DeviceValue() {
    int value = -1;
    EXPECT_EQ(cudaMemcpy(&value, device_, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    return value;
  }
  int* device_ = nullptr;
  int* pinned_ = nullptr;
};

TEST_F(CopiesTest, AsyncFromPinnedReadsTheSourceWhenTheStreamGetsThere) {
  ScopedStream stream;
  Gate gate;
  *pinned_ = 1;
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device_, pinned_, sizeof(int), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  *pinned_ = 2;  // the bug of reusing a staging buffer before the copy ran
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(DeviceValue(), 2);
}

TEST_F(CopiesTest, AsyncFromPageableCopiesTheSourceAtTheCall) {
  ScopedStream stream;
  Gate gate;
  int pageable = 1;
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device_, &pageable, sizeof(int), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  pageable = 2;
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(DeviceValue(), 1);
}

TEST_F(CopiesTest, AsyncToPinnedIsDoneOnlyWhenTheStreamGetsThere) {
  ScopedStream stream;
  ASSERT_EQ(cudaMemset(device_, 0, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  *pinned_ = 5;
  Gate gate;
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned_, device_, sizeof(int), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(*pinned_, 5);  // not copied yet: the caller must wait for the stream
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(*pinned_, 0);
}

TEST_F(CopiesTest, AsyncToPageableReturnsOnceCopied) {
  ScopedStream stream;
  int value = 3;
  ASSERT_EQ(cudaMemcpy(device_, &value, sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  int out = 0;
  ASSERT_EQ(cudaMemcpyAsync(&out, device_, sizeof(int), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(out, 3);
}

TEST_F(CopiesTest, SynchronousCopyWaitsForBlockingStreams) {
  ScopedStream blocking(cudaStreamDefault);
  const int seven = 7;
  ASSERT_EQ(cudaMemcpyAsync(device_, &seven, sizeof(int), cudaMemcpyHostToDevice, blocking),
            cudaSuccess);
  EXPECT_EQ(DeviceValue(), 7);
}

TEST_F(CopiesTest, RangesOutsideAnAllocationAreInvalid) {
  int host[2] = {};
  EXPECT_EQ(cudaMemcpy(device_, host, 2 * sizeof(int), cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host, host + 1, sizeof(int), cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);  // the source is not device memory
  EXPECT_EQ(cudaMemset(device_ + 1, 0, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(host, 0, sizeof(int)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(Copies2DTest, CopiesRowsBetweenPitches) {
  ScopedStream stream;
  std::vector<char> host(4 * 8);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<char>(i);
  char* from = nullptr;
  char* to = nullptr;
  ASSERT_EQ(cudaMalloc(&from, host.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&to, 4 * 3), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(from, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  // 4 rows of 3 bytes from pitch 8 to pitch 3.
  ASSERT_EQ(cudaMemcpy2DAsync(to, 3, from, 8, 3, 4, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<char> out(12);
  ASSERT_EQ(cudaMemcpy(out.data(), to, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int row = 0; row < 4; ++row) {
    for (int col = 0; col < 3; ++col) EXPECT_EQ(out[row * 3 + col], row * 8 + col);
  }
  EXPECT_EQ(cudaMemcpy2DAsync(to, 2, from, 8, 3, 4, cudaMemcpyDeviceToDevice, stream),
            cudaErrorInvalidPitchValue);
  cudaGetLastError();
  cudaFree(from);
  cudaFree(to);
}

}  // namespace
}  // namespace lockstep::cuda_cpu

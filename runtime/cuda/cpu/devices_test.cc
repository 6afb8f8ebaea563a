// Devices: eight by default, an H200's properties under a name that says what runs
// them, and a current device per thread.
#include <string>
#include <thread>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/stream_ops.h"

namespace lockstep::cuda_cpu {
namespace {

TEST(DevicesTest, CountAndProperties) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 8);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_NE(std::string(prop.name).find("CPU"), std::string::npos);
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.totalGlobalMem, size_t{2} << 30);
  int value = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
            cudaSuccess);
  EXPECT_EQ(value, 232448);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrGlobalMemoryBusWidth, 0), cudaSuccess);
  EXPECT_EQ(value, 6144);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 8), cudaErrorInvalidDevice);
  cudaGetLastError();
  int version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
}

TEST(DevicesTest, TheCurrentDeviceIsPerThread) {
  ASSERT_EQ(cudaSetDevice(3), cudaSuccess);
  int other = -1;
  std::thread([&] { cudaGetDevice(&other); }).join();
  EXPECT_EQ(other, 0);
  int mine = -1;
  ASSERT_EQ(cudaGetDevice(&mine), cudaSuccess);
  EXPECT_EQ(mine, 3);
  EXPECT_EQ(CurrentDevice(), 3);
  EXPECT_EQ(cudaSetDevice(8), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(DevicesTest, StreamsBelongToTheDeviceCurrentAtCreation) {
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  int seen = -1;
  ASSERT_EQ(Enqueue(stream, "which device",
                    [&] {
                      seen = CurrentDevice();
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace lockstep::cuda_cpu

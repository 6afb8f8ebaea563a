// Device memory: fresh memory is NaN poison, an overrun hits a guard page, a freed
// allocation cannot be touched, the cap gives cudaErrorMemoryAllocation, stream-ordered
// frees wait for the stream, and mapped pinned memory is its own device pointer.
#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_runtime.h>

#include "gtest/gtest.h"
#include "runtime/cuda/cpu/stream_ops.h"
#include "runtime/cuda/cpu/stream_test_util.h"

namespace lockstep::cuda_cpu {
namespace {

TEST(MemoryTest, FreshMemoryIsNanPoison) {
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 1000 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 256, 0u);
  float host[1000];
  ASSERT_EQ(cudaMemcpy(host, device, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  for (float f : host) ASSERT_TRUE(std::isnan(f));
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

// Fresh memory maps one file of poison copy-on-write: what one allocation writes stays
// its own, a new allocation of any size reads poison on every page, and a large fill
// with 0 (fresh pages in place) reads 0 rather than the file's poison.
TEST(MemoryTest, PoisonIsPerAllocationAtEverySize) {
  constexpr size_t kPage = 4096;
  for (size_t bytes : {size_t{100}, size_t{5} << 20, size_t{64} << 20}) {
    SCOPED_TRACE(bytes);
    unsigned char* first = nullptr;
    ASSERT_EQ(cudaMalloc(&first, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(first, 0x5A, bytes), cudaSuccess);
    unsigned char* second = nullptr;
    ASSERT_EQ(cudaMalloc(&second, bytes), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const size_t step = bytes > kPage ? kPage - 1 : 1;  // a byte in every page
    for (size_t i = 0; i < bytes; i += step) {
      ASSERT_EQ(first[i], 0x5A) << i;
      ASSERT_EQ(second[i], 0xFF) << i;
    }
    ASSERT_EQ(second[bytes - 1], 0xFF);
    ASSERT_EQ(cudaMemset(second, 0, bytes), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (size_t i = 0; i < bytes; i += step) ASSERT_EQ(second[i], 0) << i;
    ASSERT_EQ(second[bytes - 1], 0);
    EXPECT_EQ(cudaFree(second), cudaSuccess);
    unsigned char* third = nullptr;  // after a free: poison again, not the last contents
    ASSERT_EQ(cudaMalloc(&third, bytes), cudaSuccess);
    for (size_t i = 0; i < bytes; i += step) ASSERT_EQ(third[i], 0xFF) << i;
    EXPECT_EQ(cudaFree(third), cudaSuccess);
    EXPECT_EQ(cudaFree(first), cudaSuccess);
  }
}

TEST(MemoryTest, FindAllocationKnowsLiveAllocations) {
  char* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 100), cudaSuccess);
  std::optional<Allocation> found = FindAllocation(device + 99);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->base, reinterpret_cast<std::byte*>(device));
  EXPECT_EQ(found->bytes, 100u);
  EXPECT_TRUE(found->device);
  EXPECT_FALSE(FindAllocation(device + 100).has_value());
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_FALSE(FindAllocation(device).has_value());
  EXPECT_EQ(cudaFree(device), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(MemoryDeathTest, AnOverrunHitsTheGuardPage) {
  char* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  device[4095] = 0;  // the last byte is fine
  EXPECT_DEATH({ const_cast<volatile char*>(device)[4096] = 0; }, "");
}

TEST(MemoryDeathTest, FreedMemoryIsInaccessible) {
  char* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  ASSERT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_DEATH({ (void)const_cast<volatile char*>(device)[0]; }, "");
}

TEST(MemoryTest, TheCapLimitsAllocationWithoutBeingSticky) {
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_GT(total, 0u);
  void* too_much = nullptr;
  EXPECT_EQ(cudaMalloc(&too_much, total + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  void* some = nullptr;
  ASSERT_EQ(cudaMalloc(&some, 1 << 20), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, size_t{1} << 20);
  EXPECT_EQ(cudaFree(some), cudaSuccess);
}

TEST(MemoryTest, FreeAsyncFreesInStreamOrder) {
  ScopedStream stream;
  char* device = nullptr;
  ASSERT_EQ(cudaMallocAsync(&device, 64, stream), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device, 0, 64, stream), cudaSuccess);
  Gate gate;
  ASSERT_EQ(gate.Hold(stream), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(device, stream), cudaSuccess);
  EXPECT_TRUE(FindAllocation(device).has_value());  // the stream has not got there
  gate.Open();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_FALSE(FindAllocation(device).has_value());
}

TEST(MemoryTest, MappedPinnedMemoryIsItsOwnDevicePointer) {
  void* host = nullptr;
  ASSERT_EQ(cudaHostAlloc(&host, 128, cudaHostAllocMapped | cudaHostAllocPortable), cudaSuccess);
  void* device = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&device, host, 0), cudaSuccess);
  EXPECT_EQ(device, host);
  std::optional<Allocation> found = FindAllocation(host);
  ASSERT_TRUE(found.has_value());
  EXPECT_FALSE(found->device);
  int pageable = 0;
  EXPECT_EQ(cudaHostGetDevicePointer(&device, &pageable, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host), cudaErrorInvalidValue);  // not device memory
  cudaGetLastError();
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
}

}  // namespace
}  // namespace lockstep::cuda_cpu

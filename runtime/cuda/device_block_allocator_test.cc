// GPU checks of the device KV allocator: zero fill, 90% of free memory, and the
// ResourceExhausted message. Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/device_block_allocator.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Index of the first non-zero byte of [p, p + bytes) on the device, or -1.
int64_t FirstNonZero(const std::byte* p, size_t bytes) {
  std::vector<unsigned char> host(std::min(bytes, 64 * kMiB));
  for (size_t done = 0; done < bytes; done += host.size()) {
    const size_t n = std::min(host.size(), bytes - done);
    EXPECT_EQ(cudaMemcpy(host.data(), p + done, n, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) {
      if (host[i] != 0) return static_cast<int64_t>(done + i);
    }
  }
  return -1;
}

TEST(DeviceBlockAllocatorTest, ZeroBytesIsInvalidArgument) {
  DeviceBlockAllocator allocator(0);
  EXPECT_THAT(allocator.Allocate(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(allocator.memory_kind(), kv::MemoryKind::kDevice);
}

TEST(DeviceBlockAllocatorTest, PoolsAreZeroFilledEvenOverDirtyMemory) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  DeviceBlockAllocator allocator(0);
  const size_t bytes = 256 * kMiB + 12345;  // not a multiple of anything
  absl::StatusOr<std::byte*> first = allocator.Allocate(bytes);
  LOCKSTEP_ASSERT_OK(first);
  ASSERT_EQ(FirstNonZero(*first, bytes), -1);
  // Dirty the memory and give it back: the next pool likely reuses it.
  ASSERT_EQ(cudaMemset(*first, 0xA5, bytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  allocator.Free(*first, bytes);
  absl::StatusOr<std::byte*> second = allocator.Allocate(bytes);
  LOCKSTEP_ASSERT_OK(second);
  EXPECT_EQ(FirstNonZero(*second, bytes), -1);
  allocator.Free(*second, bytes);
}

TEST(DeviceBlockAllocatorTest, NinetyPercentOfFreeMemoryAllocatesAndFrees) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  absl::StatusOr<DeviceMemory> before = QueryDeviceMemory(0);
  LOCKSTEP_ASSERT_OK(before);
  const size_t bytes = static_cast<size_t>(before->free_bytes * 0.9) / (2 * kMiB) * (2 * kMiB);
  std::printf("free %.2f GiB of %.2f GiB; allocating %.2f GiB\n", before->free_bytes / kGiB,
              before->total_bytes / kGiB, bytes / kGiB);
  DeviceBlockAllocator allocator(0);
  absl::StatusOr<std::byte*> pool = allocator.Allocate(bytes);
  LOCKSTEP_ASSERT_OK(pool);
  EXPECT_EQ(FirstNonZero(*pool, 16 * kMiB), -1);
  EXPECT_EQ(FirstNonZero(*pool + bytes - 16 * kMiB, 16 * kMiB), -1);
  absl::StatusOr<DeviceMemory> during = QueryDeviceMemory(0);
  LOCKSTEP_ASSERT_OK(during);
  EXPECT_LE(during->free_bytes, before->free_bytes - bytes + 64 * kMiB);
  allocator.Free(*pool, bytes);
  absl::StatusOr<DeviceMemory> after = QueryDeviceMemory(0);
  LOCKSTEP_ASSERT_OK(after);
  std::printf("free after freeing: %.2f GiB\n", after->free_bytes / kGiB);
  EXPECT_GE(after->free_bytes + 64 * kMiB, before->free_bytes);
}

TEST(DeviceBlockAllocatorTest, TooLargeIsResourceExhaustedNamingBothSizes) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  absl::StatusOr<DeviceMemory> memory = QueryDeviceMemory(0);
  LOCKSTEP_ASSERT_OK(memory);
  const size_t bytes = memory->total_bytes + (size_t{1} << 30);
  DeviceBlockAllocator allocator(0);
  EXPECT_THAT(allocator.Allocate(bytes),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(absl::StrCat(bytes, " bytes")), HasSubstr("free"))));
  // The failure leaves the device usable.
  absl::StatusOr<std::byte*> small = allocator.Allocate(kMiB);
  LOCKSTEP_ASSERT_OK(small);
  allocator.Free(*small, kMiB);
}

}  // namespace
}  // namespace lockstep::cuda

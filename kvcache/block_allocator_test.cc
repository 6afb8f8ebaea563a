#include "kvcache/block_allocator.h"

#include <cstdint>
#include <limits>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

TEST(HostAllocatorTest, ReturnsAlignedZeroFilledStorage) {
  HostAllocator allocator;
  // 1000 floats is not a multiple of the alignment: the tail must still be usable.
  absl::StatusOr<float*> p = allocator.Allocate(1000);
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % HostAllocator::kAlignment, 0u);
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ((*p)[i], 0.0f) << "float " << i;
  (*p)[999] = 1.5f;
  EXPECT_EQ((*p)[999], 1.5f);
  allocator.Free(*p, 1000);
}

TEST(HostAllocatorTest, RejectsEmptyAndImpossibleRequests) {
  HostAllocator allocator;
  EXPECT_THAT(allocator.Allocate(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(allocator.Allocate(std::numeric_limits<size_t>::max() / 2),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace lockstep::kv

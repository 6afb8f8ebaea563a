#include "runtime/cuda/kernels/gemm_key.h"

#include <cstdint>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

TEST(GemmKeyTest, Buckets) {
  EXPECT_EQ(GemmMBucket(1), 1);
  EXPECT_EQ(GemmMBucket(2), 2);
  EXPECT_EQ(GemmMBucket(3), 4);
  EXPECT_EQ(GemmMBucket(17), 32);
  EXPECT_EQ(GemmMBucket(4096), 4096);
  EXPECT_EQ(GemmMBucket(8192), 8192);
  EXPECT_EQ(GemmMBucket(8193), 16384);
  EXPECT_EQ(GemmMBucket(20000), 24576);
  for (int64_t m = 1; m < 40000; m += 7) {
    const int64_t b = GemmMBucket(m);
    EXPECT_GE(b, m);
    EXPECT_LT(b, m <= kMaxGemmMBucket ? 2 * m : m + kMaxGemmMBucket) << m;
  }
}

TEST(GemmKeyTest, BatchInvariantKeyIgnoresM) {
  EXPECT_EQ(MakeGemmKey(1, 4096, 4096, true), MakeGemmKey(3000, 4096, 4096, true));
  EXPECT_NE(MakeGemmKey(1, 4096, 4096, false), MakeGemmKey(3000, 4096, 4096, false));
  EXPECT_EQ(MakeGemmKey(5, 4096, 4096, false), MakeGemmKey(8, 4096, 4096, false));
  EXPECT_NE(MakeGemmKey(8, 4096, 4096, false), MakeGemmKey(8, 4096, 1024, false));
  EXPECT_EQ(absl::Hash<GemmKey>{}(MakeGemmKey(5, 7, 9, false)),
            absl::Hash<GemmKey>{}(MakeGemmKey(6, 7, 9, false)));
}

}  // namespace
}  // namespace lockstep::cuda::kernels

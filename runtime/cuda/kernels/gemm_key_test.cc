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

TEST(GemmKeyTest, Alignments) {
  EXPECT_EQ(AddressAlignment(uintptr_t{0}), 256u);
  EXPECT_EQ(AddressAlignment(uintptr_t{4096}), 256u);
  EXPECT_EQ(AddressAlignment(uintptr_t{4096 + 128}), 128u);
  EXPECT_EQ(AddressAlignment(uintptr_t{4096 + 2}), 2u);
  EXPECT_EQ(AddressAlignment(uintptr_t{4097}), 1u);
  // A per-expert GEMM's rows start at offsets[e] * k elements: bf16 rows of hidden 264
  // (528 bytes) from a 256-byte aligned base are 16-byte aligned after an odd offset.
  const uintptr_t base = uintptr_t{1} << 20;
  EXPECT_EQ(AddressAlignment(base + 3 * 264 * 2), 16u);
  int buffer[4];
  EXPECT_EQ(AlignmentsOf(buffer, buffer + 1, nullptr).b, AddressAlignment(buffer + 1));
  EXPECT_EQ(AlignmentsOf(buffer, buffer + 1, nullptr).d, 256u);
}

TEST(GemmKeyTest, AlignmentIsPartOfTheKey) {
  const GemmAlignments aligned;
  const GemmAlignments offset{.a = 256, .b = 16, .d = 16};
  EXPECT_NE(MakeGemmKey(5, 4096, 4096, false, aligned), MakeGemmKey(5, 4096, 4096, false, offset));
  EXPECT_NE(MakeGemmKey(5, 4096, 4096, true, aligned), MakeGemmKey(9, 4096, 4096, true, offset));
  EXPECT_EQ(MakeGemmKey(5, 4096, 4096, true, offset), MakeGemmKey(9, 4096, 4096, true, offset));
  EXPECT_EQ(MakeGemmKey(5, 7, 9, false), MakeGemmKey(5, 7, 9, false, aligned));
  EXPECT_EQ(absl::Hash<GemmKey>{}(MakeGemmKey(5, 7, 9, false, offset)),
            absl::Hash<GemmKey>{}(MakeGemmKey(6, 7, 9, false, offset)));
}

TEST(GemmKeyTest, BatchLayoutIsPartOfTheKey) {
  const GemmBatch heads{.count = 4,
                        .x_ld = 768,
                        .x_stride = 192,
                        .w_ld = 512,
                        .w_stride = 131072,
                        .y_ld = 2304,
                        .y_stride = 576,
                        .w_transposed = false};
  GemmBatch other = heads;
  other.y_stride = 512;
  EXPECT_NE(MakeGemmKey(5, 512, 128, true, {}, heads), MakeGemmKey(5, 512, 128, true));
  EXPECT_NE(MakeGemmKey(5, 512, 128, true, {}, heads), MakeGemmKey(5, 512, 128, true, {}, other));
  EXPECT_EQ(MakeGemmKey(5, 512, 128, true, {}, heads), MakeGemmKey(9, 512, 128, true, {}, heads));
  EXPECT_EQ(MakeGemmKey(5, 7, 9, false), MakeGemmKey(5, 7, 9, false, {}, GemmBatch{}));
}

}  // namespace
}  // namespace lockstep::cuda::kernels

#include "kvcache/stream_copy.h"

#include <cstdint>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

// Every length and alignment of source and destination copies exactly, and nothing
// outside the destination range is written.
TEST(StreamCopyTest, CopiesExactlyAtAnyAlignment) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> src(70000);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  std::vector<size_t> sizes = {0, 1, 31, 32, 127, 4095, 4096, 4097, 4096 + 31, 32768, 65536};
  for (int i = 0; i < 30; ++i) sizes.push_back(rng() % 66000);
  for (size_t n : sizes) {
    for (size_t src_off : {0, 1, 13}) {
      for (size_t dst_off : {0, 3, 32, 45}) {
        std::vector<uint8_t> dst(n + 128, 0xAB);
        StreamCopy(dst.data() + dst_off, src.data() + src_off, n);
        StreamCopyFence();
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dst_off && i < dst_off + n;
          const uint8_t want = inside ? src[src_off + i - dst_off] : 0xAB;
          ASSERT_EQ(dst[i], want) << "n " << n << " src+" << src_off << " dst+" << dst_off
                                  << " byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::kv

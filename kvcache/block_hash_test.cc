#include "kvcache/block_hash.h"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

uint64_t HashOf(const std::string& s, uint64_t seed) {
  return Hash64(reinterpret_cast<const uint8_t*>(s.data()), s.size(), seed);
}

// The test vectors published with wyhash (input i hashed with seed i).
TEST(BlockHashTest, Hash64MatchesPublishedWyhashVectors) {
  EXPECT_EQ(HashOf("", 0), 0x0409638ee2bde459ULL);
  EXPECT_EQ(HashOf("a", 1), 0xa8412d091b5fe0a9ULL);
  EXPECT_EQ(HashOf("abc", 2), 0x32dd92e4b2915153ULL);
  EXPECT_EQ(HashOf("message digest", 3), 0x8619124089a3a16bULL);
  EXPECT_EQ(HashOf("abcdefghijklmnopqrstuvwxyz", 4), 0x7a43afb61d7f5f40ULL);
  EXPECT_EQ(HashOf("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", 5),
            0xff42329b90e50d58ULL);
  EXPECT_EQ(HashOf("1234567890123456789012345678901234567890"
                   "1234567890123456789012345678901234567890",
                   6),
            0xc39cab13b115aad3ULL);
}

// Reference values from an independent implementation (Python) that also reproduces
// the published vectors above. They pin the key of a block across processes, builds
// and machines: a change here invalidates every stored prefix key.
TEST(BlockHashTest, KeysAreStable) {
  EXPECT_EQ(RootHash(0), 0x06cfec0338ad6c79ULL);
  EXPECT_EQ(RootHash(7), 0x4d30833d7abc23f4ULL);
  std::vector<int32_t> block(16);
  std::iota(block.begin(), block.end(), 1);
  EXPECT_EQ(BlockHash(RootHash(0), block), 0x3c9618e4d1215c8aULL);
  const std::vector<int32_t> extremes = {-1, 0, 2147483647, -2147483647 - 1, 5};
  EXPECT_EQ(BlockHash(RootHash(0), extremes), 0x2d72d2cc185376e1ULL);
  std::vector<int32_t> long_block(33);  // 132 bytes: 48-byte lanes, 16-byte steps, tail
  std::iota(long_block.begin(), long_block.end(), 100);
  EXPECT_EQ(BlockHash(12345, long_block), 0x9cfb086480f11ba4ULL);
}

TEST(BlockHashTest, KeyDependsOnParentSaltEveryTokenAndOrder) {
  for (const int size : {1, 4, 16, 32, 64}) {
    SCOPED_TRACE(size);
    std::vector<int32_t> block(static_cast<size_t>(size));
    std::iota(block.begin(), block.end(), 0);
    const uint64_t base = BlockHash(RootHash(1), block);
    EXPECT_NE(base, BlockHash(RootHash(2), block));
    for (size_t i = 0; i < block.size(); ++i) {
      std::vector<int32_t> changed = block;
      changed[i] += 1;
      EXPECT_NE(base, BlockHash(RootHash(1), changed)) << "token " << i;
    }
    if (size > 4) {
      std::vector<int32_t> swapped = block;
      std::swap(swapped[3], swapped[4]);
      EXPECT_NE(base, BlockHash(RootHash(1), swapped));
    }
  }
}

}  // namespace
}  // namespace lockstep::kv

#include "kvcache/block_hash.h"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

uint64_t Xxh64Of(const std::string& s, uint64_t seed) {
  return Xxh64(reinterpret_cast<const uint8_t*>(s.data()), s.size(), seed);
}

TEST(BlockHashTest, Xxh64MatchesPublishedVectors) {
  EXPECT_EQ(Xxh64Of("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(Xxh64Of("a", 0), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(Xxh64Of("abc", 0), 0x44BC2CF5AD770999ULL);
}

// Reference values from an independent XXH64 implementation (Python, from the spec),
// which also reproduces the published vectors above. They pin the key of a block across
// processes, builds and machines: a change here invalidates every stored prefix key.
TEST(BlockHashTest, KeysAreStable) {
  EXPECT_EQ(RootHash(0), 0xBDCF42E29A04F2BFULL);
  EXPECT_EQ(RootHash(7), 0x97750544F6EE4C1AULL);
  std::vector<int32_t> block(16);
  std::iota(block.begin(), block.end(), 1);
  EXPECT_EQ(BlockHash(RootHash(0), block), 0xA49B8DAB569DF0D7ULL);
  const std::vector<int32_t> extremes = {-1, 0, 2147483647, -2147483647 - 1, 5};
  EXPECT_EQ(BlockHash(RootHash(0), extremes), 0x0B6DB7153F91914BULL);
  std::vector<int32_t> long_block(33);  // 132 bytes: stripes, words and a 4-byte tail
  std::iota(long_block.begin(), long_block.end(), 100);
  EXPECT_EQ(BlockHash(12345, long_block), 0xADAEF1AC3D0176B3ULL);
}

TEST(BlockHashTest, KeyDependsOnParentSaltEveryTokenAndOrder) {
  std::vector<int32_t> block(32);
  std::iota(block.begin(), block.end(), 0);
  const uint64_t base = BlockHash(RootHash(1), block);
  EXPECT_NE(base, BlockHash(RootHash(2), block));
  for (size_t i = 0; i < block.size(); ++i) {
    std::vector<int32_t> changed = block;
    changed[i] += 1;
    EXPECT_NE(base, BlockHash(RootHash(1), changed)) << "token " << i;
  }
  std::vector<int32_t> swapped = block;
  std::swap(swapped[3], swapped[4]);
  EXPECT_NE(base, BlockHash(RootHash(1), swapped));
}

}  // namespace
}  // namespace lockstep::kv

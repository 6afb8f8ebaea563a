#include "kvcache/prefix_hash.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "kvcache/block_hash.h"
#include "kvcache/radix_tree.h"

namespace lockstep::kv {
namespace {

std::vector<int32_t> Iota(int n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Every key the radix tree computes, in order (the tree takes a plain function pointer).
std::vector<uint64_t>* tree_keys = nullptr;
uint64_t RecordingHasher(uint64_t parent, absl::Span<const int32_t> tokens) {
  const uint64_t key = BlockHash(parent, tokens);
  if (tree_keys != nullptr) tree_keys->push_back(key);
  return key;
}

TEST(PrefixHashTest, ChainIsTheRadixTreesKeys) {
  constexpr int kTpb = 4;
  constexpr uint64_t kSalt = 77;
  const std::vector<int32_t> tokens = Iota(3 * kTpb + 2, 10);
  std::vector<uint64_t> keys;
  tree_keys = &keys;
  RadixTree tree(/*num_blocks=*/8, kTpb, kSalt, &RecordingHasher);
  BlockId parent = RadixTree::kRoot;
  for (int b = 0; b < 3; ++b) {
    ASSERT_TRUE(tree.Insert(parent, BlockId(b), absl::MakeConstSpan(tokens).subspan(b * kTpb, kTpb)));
    parent = BlockId(b);
  }
  tree_keys = nullptr;
  EXPECT_EQ(PrefixHashChain(kSalt, kTpb, tokens), keys);
}

TEST(PrefixHashTest, ChainsFromTheSaltsRootAndSkipsThePartialBlock) {
  const std::vector<int32_t> tokens = Iota(7, 0);
  const std::vector<uint64_t> chain = PrefixHashChain(5, 3, tokens);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_EQ(chain[0], BlockHash(RootHash(5), absl::MakeConstSpan(tokens).subspan(0, 3)));
  EXPECT_EQ(chain[1], BlockHash(chain[0], absl::MakeConstSpan(tokens).subspan(3, 3)));
  EXPECT_TRUE(PrefixHashChain(5, 8, tokens).empty());
}

TEST(PrefixHashTest, SharedPrefixesShareKeysAndSaltsSeparateThem) {
  std::vector<int32_t> a = Iota(12, 0);
  std::vector<int32_t> b = a;
  b[9] = 999;  // differs in the third block of 4
  const std::vector<uint64_t> ca = PrefixHashChain(1, 4, a);
  const std::vector<uint64_t> cb = PrefixHashChain(1, 4, b);
  EXPECT_EQ(ca[0], cb[0]);
  EXPECT_EQ(ca[1], cb[1]);
  EXPECT_NE(ca[2], cb[2]);
  EXPECT_NE(PrefixHashChain(2, 4, a)[0], ca[0]);
}

}  // namespace
}  // namespace lockstep::kv

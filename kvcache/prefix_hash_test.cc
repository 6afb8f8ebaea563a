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

TEST(PrefixKeysTest, ExtendingInStepsHashesLikeTheWholeSequence) {
  const std::vector<int32_t> tokens = Iota(23, 40);
  PrefixKeys keys;
  for (const size_t n : {0, 3, 4, 9, 9, 16, 23}) {
    keys.Extend(/*salt=*/7, /*tokens_per_block=*/4, absl::MakeConstSpan(tokens).first(n));
    EXPECT_EQ(std::vector<uint64_t>(keys.keys().begin(), keys.keys().end()),
              PrefixHashChain(7, 4, absl::MakeConstSpan(tokens).first(n)))
        << n << " tokens";
    EXPECT_EQ(keys.num_tokens(), static_cast<int64_t>(n));
  }
}

TEST(PrefixKeysTest, AnotherChainOrAShorterSequenceStartsOver) {
  const std::vector<int32_t> tokens = Iota(12, 0);
  PrefixKeys keys;
  keys.Extend(1, 4, tokens);
  keys.Extend(2, 4, tokens);  // another salt
  EXPECT_EQ(std::vector<uint64_t>(keys.keys().begin(), keys.keys().end()),
            PrefixHashChain(2, 4, tokens));
  keys.Extend(2, 3, tokens);  // another block size
  EXPECT_EQ(std::vector<uint64_t>(keys.keys().begin(), keys.keys().end()),
            PrefixHashChain(2, 3, tokens));
  std::vector<int32_t> other = Iota(6, 500);
  keys.Extend(2, 3, other);  // fewer tokens than covered: another sequence
  EXPECT_EQ(std::vector<uint64_t>(keys.keys().begin(), keys.keys().end()),
            PrefixHashChain(2, 3, other));
}

TEST(PrefixKeysTest, CheckCoversNamesWhatDiffers) {
  PrefixKeys keys;
  keys.Extend(9, 4, Iota(10, 0));
  EXPECT_TRUE(keys.CheckCovers(9, 4, 10).ok());
  const absl::Status stale = keys.CheckCovers(9, 4, 14);
  EXPECT_EQ(stale.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stale.message().find("cover 10 tokens; the prompt has 14"), absl::string_view::npos)
      << stale;
  const absl::Status salt = keys.CheckCovers(8, 4, 10);
  EXPECT_EQ(salt.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(salt.message().find("salt 9"), absl::string_view::npos) << salt;
  EXPECT_EQ(keys.CheckCovers(9, 5, 10).code(), absl::StatusCode::kInvalidArgument);
  // A sequence shorter than a block needs no key; keys that name blocks still must fit.
  EXPECT_TRUE(PrefixKeys().CheckCovers(9, 4, 3).ok());
  EXPECT_EQ(keys.CheckCovers(9, 4, 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PrefixKeysTest, CheckCoversAtLeastTakesAnyShorterSequence) {
  PrefixKeys keys;
  keys.Extend(9, 4, Iota(10, 0));
  for (int64_t n = 0; n <= 10; ++n) EXPECT_TRUE(keys.CheckCoversAtLeast(9, 4, n).ok()) << n;
  const absl::Status stale = keys.CheckCoversAtLeast(9, 4, 11);
  EXPECT_EQ(stale.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stale.message().find("cover 10 tokens; the prompt has 11"), absl::string_view::npos)
      << stale;
  EXPECT_EQ(keys.CheckCoversAtLeast(8, 4, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(keys.CheckCoversAtLeast(9, 2, 4).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::kv

#include "kvcache/radix_tree.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr int kTpb = 4;

std::vector<BlockId> MatchAll(const RadixTree& tree, const std::vector<int32_t>& tokens,
                              int64_t max_blocks = 1000) {
  std::vector<BlockId> out;
  const int64_t n = tree.Match(tokens, max_blocks, [&](BlockId b) { out.push_back(b); });
  EXPECT_EQ(n, static_cast<int64_t>(out.size()));
  return out;
}

absl::Span<const int32_t> Block(const std::vector<int32_t>& tokens, int i) {
  return absl::MakeConstSpan(tokens).subspan(static_cast<size_t>(i) * kTpb, kTpb);
}

std::vector<std::string> Audit(const RadixTree& tree) {
  std::vector<std::string> out;
  tree.AuditInto("", &out);
  return out;
}

// Publishes `tokens` block by block onto the given blocks; returns how many went in.
int Publish(RadixTree& tree, const std::vector<int32_t>& tokens, std::vector<int32_t> blocks) {
  BlockId parent = RadixTree::kRoot;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (!tree.Insert(parent, BlockId(blocks[i]), Block(tokens, static_cast<int>(i)))) {
      return static_cast<int>(i);
    }
    parent = BlockId(blocks[i]);
  }
  return static_cast<int>(blocks.size());
}

const std::vector<int32_t> kA = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};  // 3.5 blocks

TEST(RadixTreeTest, LongestPrefixOfFullBlocks) {
  RadixTree tree(16, kTpb, /*salt=*/0);
  ASSERT_EQ(Publish(tree, kA, {5, 9, 2}), 3);
  EXPECT_EQ(tree.num_nodes(), 3);
  EXPECT_THAT(MatchAll(tree, kA), ElementsAre(BlockId(5), BlockId(9), BlockId(2)));
  EXPECT_THAT(MatchAll(tree, kA, 2), ElementsAre(BlockId(5), BlockId(9)));
  // Diverges inside the second block: only the first matches.
  std::vector<int32_t> b = kA;
  b[6] = 99;
  EXPECT_THAT(MatchAll(tree, b), ElementsAre(BlockId(5)));
  // A partial last block never matches.
  EXPECT_THAT(MatchAll(tree, {1, 2, 3}), IsEmpty());
  EXPECT_THAT(Audit(tree), IsEmpty());
}

TEST(RadixTreeTest, SaltSeparatesModels) {
  RadixTree tree(16, kTpb, /*salt=*/1);
  RadixTree other(16, kTpb, /*salt=*/2);
  ASSERT_EQ(Publish(tree, kA, {0}), 1);
  ASSERT_EQ(Publish(other, kA, {0}), 1);
  // Same tokens, same block, different keys: the chains are keyed per salt.
  EXPECT_THAT(MatchAll(tree, kA), ElementsAre(BlockId(0)));
  RadixTree same_salt(16, kTpb, /*salt=*/1);
  ASSERT_EQ(Publish(same_salt, kA, {3}), 1);
  EXPECT_THAT(MatchAll(same_salt, kA), ElementsAre(BlockId(3)));
}

TEST(RadixTreeTest, SamePrefixTwiceIsRefused) {
  RadixTree tree(16, kTpb, 0);
  ASSERT_EQ(Publish(tree, kA, {0, 1}), 2);
  EXPECT_EQ(Publish(tree, kA, {7, 8}), 0);  // block 7 would duplicate block 0
  EXPECT_EQ(tree.num_nodes(), 2);
  EXPECT_FALSE(tree.Contains(BlockId(7)));
  EXPECT_THAT(MatchAll(tree, kA), ElementsAre(BlockId(0), BlockId(1)));
  EXPECT_THAT(Audit(tree), IsEmpty());
}

// Every key collides: a hit must still check parent and tokens, so no wrong KV is
// ever reused.
uint64_t ConstantHash(uint64_t, absl::Span<const int32_t>) { return 42; }
// Keys that ignore the tokens: every block at the same depth collides.
uint64_t DepthHash(uint64_t parent, absl::Span<const int32_t>) { return parent * 31 + 1; }

TEST(RadixTreeTest, CollisionsNeverReuseOtherTokens) {
  RadixTree tree(16, kTpb, 0, &ConstantHash);
  ASSERT_EQ(Publish(tree, kA, {0, 1}), 1);  // the second block collides with the first
  EXPECT_THAT(MatchAll(tree, kA), ElementsAre(BlockId(0)));
  // Same key, other tokens: no match.
  EXPECT_THAT(MatchAll(tree, {9, 9, 9, 9}), IsEmpty());
  // Same key and tokens as node 0, but as a second block (parent differs): no match.
  EXPECT_THAT(MatchAll(tree, {1, 2, 3, 4, 1, 2, 3, 4}), ElementsAre(BlockId(0)));
  EXPECT_THAT(Audit(tree), IsEmpty());

  RadixTree depth(16, kTpb, 0, &DepthHash);
  ASSERT_EQ(Publish(depth, kA, {0, 1, 2}), 3);
  std::vector<int32_t> other = kA;
  other[5] = -5;  // second block differs; its key does not
  EXPECT_THAT(MatchAll(depth, other), ElementsAre(BlockId(0)));
  EXPECT_EQ(Publish(depth, other, {7, 8}), 0);  // the first key is block 0's
}

TEST(RadixTreeTest, EvictsLeastRecentlyReleasedLeafFirst) {
  RadixTree tree(16, kTpb, 0);
  const std::vector<int32_t> b = {1, 2, 3, 4, 20, 21, 22, 23};  // shares block 0 with kA
  ASSERT_EQ(Publish(tree, kA, {0, 1, 2}), 3);
  ASSERT_TRUE(tree.Insert(BlockId(0), BlockId(3), Block(b, 1)));
  // Release chain kA (deepest first), then the branch b.
  tree.MarkEvictable(BlockId(2));
  tree.MarkEvictable(BlockId(1));
  tree.MarkEvictable(BlockId(3));
  tree.MarkEvictable(BlockId(0));
  EXPECT_THAT(tree.LruOrder(), ElementsAre(BlockId(2), BlockId(1), BlockId(3), BlockId(0)));
  EXPECT_THAT(Audit(tree), IsEmpty());
  // Reusing block 1's chain takes 0 and 1 out of the LRU; releasing puts them back last.
  tree.MarkInUse(BlockId(0));
  tree.MarkInUse(BlockId(1));
  tree.MarkEvictable(BlockId(1));
  tree.MarkEvictable(BlockId(0));
  EXPECT_THAT(tree.LruOrder(), ElementsAre(BlockId(2), BlockId(3), BlockId(1), BlockId(0)));
  EXPECT_EQ(tree.EvictLru(), BlockId(2));
  EXPECT_EQ(tree.EvictLru(), BlockId(3));
  EXPECT_THAT(MatchAll(tree, kA), ElementsAre(BlockId(0), BlockId(1)));
  EXPECT_THAT(MatchAll(tree, b), ElementsAre(BlockId(0)));
  EXPECT_EQ(tree.EvictLru(), BlockId(1));
  EXPECT_EQ(tree.EvictLru(), BlockId(0));
  EXPECT_EQ(tree.EvictLru(), std::nullopt);
  EXPECT_EQ(tree.num_nodes(), 0);
  EXPECT_THAT(MatchAll(tree, kA), IsEmpty());
  EXPECT_THAT(Audit(tree), IsEmpty());
  // An evicted block can be published again.
  EXPECT_EQ(Publish(tree, kA, {2}), 1);
}

TEST(RadixTreeTest, AuditFlagsAParentAheadOfItsChild) {
  RadixTree tree(16, kTpb, 0);
  ASSERT_EQ(Publish(tree, kA, {0, 1}), 2);
  tree.MarkEvictable(BlockId(0));  // parent first: the LRU front would not be a leaf
  tree.MarkEvictable(BlockId(1));
  EXPECT_THAT(Audit(tree), Not(IsEmpty()));
}

}  // namespace
}  // namespace lockstep::kv

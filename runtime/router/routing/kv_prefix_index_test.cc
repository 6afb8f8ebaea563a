#include "runtime/router/routing/kv_prefix_index.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;

KvEventBatch Batch(const std::string& instance, int32_t rank, uint64_t seq,
                   std::vector<uint64_t> committed, std::vector<uint64_t> evicted = {}) {
  return {instance, rank, /*incarnation=*/1, seq, std::move(committed), std::move(evicted)};
}

TEST(KvPrefixIndexTest, MatchCountsLeadingBlocksPerRank) {
  KvPrefixIndex index({});
  ASSERT_TRUE(index.Apply(Batch("a", 0, 1, {10, 11, 12})));
  ASSERT_TRUE(index.Apply(Batch("a", 1, 1, {10})));
  ASSERT_TRUE(index.Apply(Batch("b", 0, 1, {10, 11, 99})));
  const std::vector<KvPrefixMatch> m = index.Match(std::vector<uint64_t>{10, 11, 12, 13});
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].instance, "a");
  EXPECT_EQ(m[0].rank, 0);
  EXPECT_EQ(m[0].blocks, 3);
  EXPECT_EQ(m[1].rank, 1);
  EXPECT_EQ(m[1].blocks, 1);
  EXPECT_EQ(m[2].instance, "b");
  EXPECT_EQ(m[2].blocks, 2);
  EXPECT_EQ(index.Match(std::vector<uint64_t>{12, 13}).size(), 1u);  // only a/0 holds 12
  EXPECT_TRUE(index.Match(std::vector<uint64_t>{13}).empty());
  EXPECT_EQ(index.size(), 4u);
}

// A block counts in the best tier that holds it: a chain whose head is on the device
// and whose tail only the host or disk tier holds matches in full, with that split.
TEST(KvPrefixIndexTest, MatchSplitsTheLeadingBlocksByTier) {
  KvPrefixIndex index({});
  KvEventBatch a = Batch("a", 0, 1, {10, 11});
  a.host_stored = {10, 11, 12};  // 10 and 11 copied down while still on the device
  a.disk_stored = {13};
  ASSERT_TRUE(index.Apply(a));
  KvEventBatch b = Batch("b", 0, 1, {});
  b.host_stored = {10, 11, 12, 13};
  ASSERT_TRUE(index.Apply(b));
  const std::vector<uint64_t> chain = {10, 11, 12, 13, 14};
  std::vector<KvPrefixMatch> m = index.Match(chain);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].instance, "a");
  EXPECT_EQ(m[0].blocks, 4);
  EXPECT_EQ(m[0].host_blocks, 1);
  EXPECT_EQ(m[0].disk_blocks, 1);
  EXPECT_EQ(m[1].blocks, 4);
  EXPECT_EQ(m[1].host_blocks, 4);
  EXPECT_EQ(m[1].disk_blocks, 0);
  EXPECT_EQ(index.KeysOf("a", 0), (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(index.KeysOf("a", 0, KvTier::kHost), (std::vector<uint64_t>{10, 11, 12}));
  EXPECT_EQ(index.KeysOf("a", 0, KvTier::kDisk), (std::vector<uint64_t>{13}));

  // a's device evicts 11 (the host tier still holds it), the host tier spills 12 to
  // disk; b's host tier drops 13.
  KvEventBatch a2 = Batch("a", 0, 2, {}, {11});
  a2.host_removed = {12};
  a2.disk_stored = {12};
  ASSERT_TRUE(index.Apply(a2));
  KvEventBatch b2 = Batch("b", 0, 2, {});
  b2.host_removed = {13};
  ASSERT_TRUE(index.Apply(b2));
  m = index.Match(chain);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].blocks, 4);
  EXPECT_EQ(m[0].host_blocks, 1);  // 11
  EXPECT_EQ(m[0].disk_blocks, 2);  // 12, 13
  EXPECT_EQ(m[1].blocks, 3);
  EXPECT_EQ(m[1].host_blocks, 3);
  EXPECT_EQ(index.size(), 4u);  // 13 still on a's disk

  // Every tier of a key gone: the key is gone. A snapshot replaces every tier.
  KvEventBatch a3 = Batch("a", 0, 3, {}, {10});
  a3.host_removed = {10, 11};
  a3.disk_removed = {12, 13};
  ASSERT_TRUE(index.Apply(a3));
  EXPECT_TRUE(index.KeysOf("a", 0, KvTier::kHost).empty());
  EXPECT_EQ(index.Match(chain).size(), 1u);  // b only
  index.ApplySnapshot({"a", 0, 1, 4, {10}, {20}, {11}});
  EXPECT_EQ(index.KeysOf("a", 0), (std::vector<uint64_t>{10}));
  EXPECT_EQ(index.KeysOf("a", 0, KvTier::kHost), (std::vector<uint64_t>{20}));
  EXPECT_EQ(index.KeysOf("a", 0, KvTier::kDisk), (std::vector<uint64_t>{11}));
  m = index.Match(chain);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].blocks, 2);
  EXPECT_EQ(m[0].disk_blocks, 1);
}

TEST(KvPrefixIndexTest, GapNeedsSnapshotAndRestartStartsEmpty) {
  KvPrefixIndex index({});
  ASSERT_TRUE(index.Apply(Batch("a", 0, 1, {1, 2})));
  EXPECT_FALSE(index.Apply(Batch("a", 0, 3, {3})));  // batch 2 lost
  EXPECT_TRUE(index.NeedsSnapshot("a", 0));
  EXPECT_TRUE(index.KeysOf("a", 0).empty());
  EXPECT_FALSE(index.Apply(Batch("a", 0, 4, {4})));  // ignored until the snapshot
  index.ApplySnapshot({"a", 0, 1, 4, {1, 2, 3, 4}});
  EXPECT_FALSE(index.NeedsSnapshot("a", 0));
  EXPECT_TRUE(index.Apply(Batch("a", 0, 5, {5}, {1})));
  EXPECT_EQ(index.KeysOf("a", 0), (std::vector<uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(index.resyncs(), 1);
  // The instance restarts: incarnation 2 starts at batch 1 with an empty cache.
  EXPECT_TRUE(index.Apply({"a", 0, 2, 1, {7}, {}}));
  EXPECT_EQ(index.KeysOf("a", 0), (std::vector<uint64_t>{7}));
  EXPECT_TRUE(index.Apply(Batch("a", 0, 6, {8})));  // late, from incarnation 1: ignored
  EXPECT_EQ(index.KeysOf("a", 0), (std::vector<uint64_t>{7}));
}

TEST(KvPrefixIndexTest, DropsLeastRecentlyUsedKeysBeyondTheBound) {
  KvPrefixIndex index({.max_keys = 2});
  ASSERT_TRUE(index.Apply(Batch("a", 0, 1, {1, 2})));
  ASSERT_EQ(index.Match(std::vector<uint64_t>{1}).size(), 1u);  // 1 is now the most recent
  ASSERT_TRUE(index.Apply(Batch("b", 0, 1, {3})));
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.KeysOf("a", 0), (std::vector<uint64_t>{1}));
  EXPECT_EQ(index.KeysOf("b", 0), (std::vector<uint64_t>{3}));
}

// The index against the ranks' true caches under random event streams: batches lost
// (gaps), instances restarted (with or without the router noticing), snapshots
// delivered late, and a small bound that drops keys.
struct Rank {
  std::string instance;
  int32_t rank = 0;
  uint64_t incarnation = 1;
  uint64_t seq = 0;
  std::set<uint64_t> keys;
  bool wants_snapshot = false;
  // A batch of it was lost and no later batch or snapshot arrived yet: the index is
  // behind it until the next one shows the gap.
  bool behind = false;
};

void RunRandomStreams(uint64_t seed, size_t max_keys) {
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
  const auto key = [&] { return static_cast<uint64_t>(1 + rng() % 48); };
  KvPrefixIndex index({.max_keys = max_keys});
  std::vector<Rank> ranks;
  for (const char* name : {"a", "b", "c"}) {
    for (int32_t r = 0; r < 2; ++r) ranks.push_back({.instance = name, .rank = r});
  }
  // Whether the router has heard of each instance's current incarnation (before it
  // has, the index may still hold the old cache's keys).
  std::vector<bool> current(3, true);
  for (int step = 0; step < 4000; ++step) {
    const size_t i = rng() % ranks.size();
    Rank& rank = ranks[i];
    const size_t inst = i / 2;
    if (chance(0.01)) {  // restart the instance
      for (size_t j = inst * 2; j < inst * 2 + 2; ++j) {
        ++ranks[j].incarnation;
        ranks[j].seq = 0;
        ranks[j].keys.clear();
        ranks[j].wants_snapshot = false;
        ranks[j].behind = false;
      }
      current[inst] = false;
      if (chance(0.5)) {  // it registered again
        index.RemoveInstance(rank.instance);
        current[inst] = true;
      }
      continue;
    }
    if (rank.wants_snapshot && chance(0.3)) {
      index.ApplySnapshot({rank.instance, rank.rank, rank.incarnation, rank.seq,
                           std::vector<uint64_t>(rank.keys.begin(), rank.keys.end())});
      rank.wants_snapshot = false;
      rank.behind = false;
      current[inst] = true;
    } else {
      KvEventBatch batch{rank.instance, rank.rank, rank.incarnation, ++rank.seq, {}, {}};
      for (uint64_t k : rank.keys) {
        if (chance(0.2)) batch.evicted.push_back(k);
      }
      for (uint64_t k : batch.evicted) rank.keys.erase(k);
      for (int n = static_cast<int>(rng() % 4); n > 0; --n) {
        const uint64_t k = key();
        if (rank.keys.insert(k).second) batch.committed.push_back(k);
      }
      if (chance(0.9)) {
        if (!index.Apply(batch)) rank.wants_snapshot = true;
        rank.behind = false;
        current[inst] = true;
      } else {
        rank.behind = true;
      }
    }
    // Every rank the router is current on: in sync with exactly (or, with a tight
    // bound, a subset of) its true keys; or out of sync, holding nothing.
    std::set<uint64_t> held;
    for (size_t j = 0; j < ranks.size(); ++j) {
      const Rank& r = ranks[j];
      const std::vector<uint64_t> keys = index.KeysOf(r.instance, r.rank);
      held.insert(keys.begin(), keys.end());
      if (!current[j / 2] || r.behind) continue;
      SCOPED_TRACE(::testing::Message() << "step " << step << " " << r.instance << "/" << r.rank);
      if (index.NeedsSnapshot(r.instance, r.rank)) {
        ASSERT_TRUE(keys.empty());
        continue;
      }
      if (max_keys >= 1000) {
        ASSERT_EQ(keys, std::vector<uint64_t>(r.keys.begin(), r.keys.end()));
      } else {
        ASSERT_TRUE(std::includes(r.keys.begin(), r.keys.end(), keys.begin(), keys.end()));
      }
    }
    ASSERT_EQ(index.size(), held.size());
    ASSERT_LE(index.size(), max_keys);
    // Match agrees with the keys held: per rank, the longest held prefix of the chain.
    std::vector<uint64_t> chain(1 + rng() % 4);
    for (uint64_t& k : chain) k = key();
    const std::vector<KvPrefixMatch> matches = index.Match(chain);
    for (const KvPrefixMatch& m : matches) {
      const std::vector<uint64_t> keys = index.KeysOf(m.instance, m.rank);
      int64_t expected = 0;
      while (expected < static_cast<int64_t>(chain.size()) &&
             std::binary_search(keys.begin(), keys.end(), chain[expected])) {
        ++expected;
      }
      ASSERT_GE(expected, 1);
      ASSERT_EQ(m.blocks, expected);
    }
    // ...and, without the bound dropping keys, against the ranks' true caches: every
    // rank the index is in sync with appears with the longest prefix it really holds.
    if (max_keys < 1000) continue;
    for (size_t j = 0; j < ranks.size(); ++j) {
      const Rank& r = ranks[j];
      if (!current[j / 2] || r.behind || index.NeedsSnapshot(r.instance, r.rank)) continue;
      int64_t expected = 0;
      while (expected < static_cast<int64_t>(chain.size()) && r.keys.count(chain[expected]) > 0) {
        ++expected;
      }
      const auto found = std::find_if(matches.begin(), matches.end(), [&](const KvPrefixMatch& m) {
        return m.instance == r.instance && m.rank == r.rank;
      });
      SCOPED_TRACE(::testing::Message()
                   << "step " << step << " match " << r.instance << "/" << r.rank);
      if (expected == 0) {
        ASSERT_TRUE(found == matches.end());
      } else {
        ASSERT_TRUE(found != matches.end());
        ASSERT_EQ(found->blocks, expected);
      }
    }
  }
  EXPECT_GT(index.resyncs(), 0);
}

TEST(KvPrefixIndexTest, RandomStreamsMatchTheRanksCaches) {
  RunRandomStreams(TestSeed(), /*max_keys=*/1 << 20);
}

TEST(KvPrefixIndexTest, RandomStreamsStayWithinTheBound) {
  RunRandomStreams(TestSeed() + 1, /*max_keys=*/16);
}

}  // namespace
}  // namespace lockstep::router

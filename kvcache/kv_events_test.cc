#include "kvcache/kv_events.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"
#include "kvcache/prefix_hash.h"
#include "kvcache/testing/token_run.h"
#include "kvcache/tier_file.h"

namespace lockstep::kv {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

TEST(KvEventLogTest, CoalescesWithinATake) {
  KvEventLog log;
  log.OnCommitted(1);
  log.OnCommitted(2);
  log.OnEvicted(2);  // committed then evicted: neither
  log.OnEvicted(7);  // held before
  log.OnEvicted(8);
  log.OnCommitted(8);  // evicted then committed again: committed only
  KvEventDelta d = log.Take();
  EXPECT_THAT(d.committed, ElementsAre(1, 8));
  EXPECT_THAT(d.evicted, ElementsAre(7));
  EXPECT_TRUE(log.empty());
  EXPECT_TRUE(log.Take().empty());
  // Held before this take: evicted, committed, evicted again is an eviction.
  log.OnEvicted(1);
  log.OnCommitted(1);
  log.OnEvicted(1);
  d = log.Take();
  EXPECT_THAT(d.committed, IsEmpty());
  EXPECT_THAT(d.evicted, ElementsAre(1));
}

// Each tier's keys coalesce on their own: the same key stored below and published in
// the device tree is reported once per tier.
TEST(KvEventLogTest, TiersCoalesceIndependently) {
  KvEventLog log;
  log.OnCommitted(5);
  log.OnStoredBelow(5, Tier::kHost);  // copied down while still published
  log.OnStoredBelow(6, Tier::kHost);
  log.OnRemovedBelow(6, Tier::kHost);  // stored then removed: neither
  log.OnStoredBelow(6, Tier::kDisk);   // spilled to disk
  log.OnRemovedBelow(9, Tier::kDisk);  // held before
  KvEventDelta d = log.Take();
  EXPECT_THAT(d.committed, ElementsAre(5));
  EXPECT_THAT(d.evicted, IsEmpty());
  EXPECT_THAT(d.host.stored, ElementsAre(5));
  EXPECT_THAT(d.host.removed, IsEmpty());
  EXPECT_THAT(d.disk.stored, ElementsAre(6));
  EXPECT_THAT(d.disk.removed, ElementsAre(9));
  EXPECT_TRUE(log.Take().empty());
  log.OnEvicted(5);  // evicted from the device, still in the host tier
  d = log.Take();
  EXPECT_THAT(d.evicted, ElementsAre(5));
  EXPECT_TRUE(d.host.empty());
  EXPECT_FALSE(d.empty());
}

// Applying each delta (evicted, then committed) to a set reproduces the true key set
// under random commits and evictions.
TEST(KvEventLogTest, DeltasReplayTheKeySet) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  KvEventLog log;
  std::set<uint64_t> truth, replayed;
  for (int step = 0; step < 2000; ++step) {
    for (int n = static_cast<int>(rng() % 6); n > 0; --n) {
      const uint64_t key = rng() % 32;
      if (truth.insert(key).second) {
        log.OnCommitted(key);
      } else if (rng() % 2 == 0) {
        truth.erase(key);
        log.OnEvicted(key);
      }
    }
    if (rng() % 3 != 0) continue;
    const KvEventDelta d = log.Take();
    for (uint64_t k : d.evicted) ASSERT_EQ(replayed.erase(k), 1u) << "step " << step;
    replayed.insert(d.committed.begin(), d.committed.end());
    ASSERT_EQ(replayed, truth) << "step " << step;
  }
}

constexpr int kTpb = 4;
constexpr uint64_t kSalt = 0x5eed;

std::unique_ptr<KvManager> Manager(int32_t blocks) {
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = kTpb};
  config.target.num_blocks = blocks;
  config.target.reuse_salt = kSalt;
  absl::StatusOr<std::unique_ptr<KvManager>> m = KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? std::move(*m) : nullptr;
}

// Runs a request over `prompt` to its end: its full blocks are published, then freed
// (they stay in the tree, evictable).
void Serve(KvManager& kv, int64_t id, const std::vector<int32_t>& prompt) {
  const RequestId rid(id);
  ASSERT_THAT(kv.CreateCache(rid, prompt).status(), IsOk());
  const int64_t n = static_cast<int64_t>(prompt.size());
  ASSERT_THAT(kv.Resize(rid, PoolKind::kTarget, n, n), IsOk());
  ASSERT_THAT(kv.Commit(rid, prompt), IsOk());
  kv.Release(rid);
}

// The claim of prefix_hash.h: the keys a real manager publishes for a prompt are its
// PrefixHashChain with the pool's salt, and eviction reports them leaving.
TEST(KvEventsTest, ManagerPublishesThePromptsChainAndItsEvictions) {
  std::unique_ptr<KvManager> kv = Manager(/*blocks=*/3);
  ASSERT_NE(kv, nullptr);
  KvEventLog log;
  kv->SetEventObserver(&log);
  const std::vector<int32_t> a = Tokens(3 * kTpb, 100);  // 3 full blocks
  Serve(*kv, 1, a);
  const std::vector<uint64_t> chain = PrefixHashChain(kSalt, kTpb, a);
  ASSERT_EQ(chain.size(), 3u);
  KvEventDelta d = log.Take();
  EXPECT_THAT(d.committed, ElementsAreArray(chain));
  EXPECT_THAT(d.evicted, IsEmpty());

  // A second prompt sharing a's first block reuses it (no new key for it) and needs
  // two blocks: the full pool of 3 evicts a's unshared tail, deepest first.
  std::vector<int32_t> b = Tokens(3 * kTpb, 100);
  for (size_t i = kTpb; i < b.size(); ++i) b[i] += 1000;
  Serve(*kv, 2, b);
  const std::vector<uint64_t> b_chain = PrefixHashChain(kSalt, kTpb, b);
  ASSERT_EQ(b_chain[0], chain[0]);
  d = log.Take();
  EXPECT_THAT(d.committed, UnorderedElementsAreArray({b_chain[1], b_chain[2]}));
  EXPECT_THAT(d.evicted, ElementsAre(chain[2], chain[1]));

  // Detached: nothing more is reported.
  kv->SetEventObserver(nullptr);
  Serve(*kv, 3, Tokens(2 * kTpb, 7));
  EXPECT_TRUE(log.empty());
}

KvManagerConfig TieredConfig(int32_t blocks, int64_t host_blocks) {
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = kTpb};
  config.target.num_blocks = blocks;
  config.target.reuse_salt = kSalt;
  config.tiers.host_bytes = host_blocks * static_cast<int64_t>(config.target.layout.BlockBytes());
  config.tiers.disk_path = std::string(std::getenv("TEST_TMPDIR")) + "/kv_events_disk";
  config.tiers.disk_bytes = 1 << 20;
  return config;
}

// The tiers report the keys they hold: a released prompt's blocks are copied down (two
// fit the host tier, the third spills to disk), in the same delta as their commit.
TEST(KvEventsTest, TiersReportTheKeysTheyStore) {
  absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(TieredConfig(3, 2));
  ASSERT_THAT(kv, IsOk());
  KvEventLog log;
  (*kv)->SetEventObserver(&log);
  const std::vector<int32_t> a = Tokens(3 * kTpb, 100);
  Serve(**kv, 1, a);
  const std::vector<uint64_t> chain = PrefixHashChain(kSalt, kTpb, a);
  const KvEventDelta d = log.Take();
  EXPECT_THAT(d.committed, ElementsAreArray(chain));
  EXPECT_THAT(d.host.stored, ::testing::SizeIs(2));
  EXPECT_THAT(d.disk.stored, ::testing::SizeIs(1));
  std::vector<uint64_t> below = d.host.stored;
  below.insert(below.end(), d.disk.stored.begin(), d.disk.stored.end());
  EXPECT_THAT(below, UnorderedElementsAreArray(chain));
  EXPECT_THAT(d.host.removed, IsEmpty());
  EXPECT_THAT(d.disk.removed, IsEmpty());
}

// Replaying every delta per tier reproduces each tier's key count and never removes a
// key the tier did not hold, under random prompts over tiny
// pools (device 4 blocks, host 3, disk 6).
TEST(KvEventsTest, TierDeltasReplayEachTier) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  KvManagerConfig config = TieredConfig(4, 3);
  config.tiers.disk_bytes =
      static_cast<int64_t>(6 * TierFileBytes(kTpb, config.target.layout.BlockBytes()));
  absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(config);
  ASSERT_THAT(kv, IsOk());
  KvEventLog log;
  (*kv)->SetEventObserver(&log);
  std::set<uint64_t> device, host, disk;
  // A key removed and stored again within one delta is only in `stored`: inserting it
  // is a no-op when it was held before.
  const auto apply = [](const std::vector<uint64_t>& removed, const std::vector<uint64_t>& stored,
                        std::set<uint64_t>& keys, const char* tier, int request) {
    for (uint64_t k : removed) EXPECT_EQ(keys.erase(k), 1u) << tier << ", request " << request;
    keys.insert(stored.begin(), stored.end());
  };
  for (int request = 1; request <= 300; ++request) {
    // Prompts of 1-3 blocks drawn from a few families, so prefixes recur.
    std::vector<int32_t> prompt = Tokens(static_cast<int>(1 + rng() % 3) * kTpb, 0);
    const int32_t family = static_cast<int32_t>(rng() % 5);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] += family * 100 + (i >= kTpb ? 7 : 0);
    Serve(**kv, request, prompt);
    if (rng() % 2 == 0) continue;
    const KvEventDelta d = log.Take();
    apply(d.evicted, d.committed, device, "device", request);
    apply(d.host.removed, d.host.stored, host, "host", request);
    apply(d.disk.removed, d.disk.stored, disk, "disk", request);
    ASSERT_FALSE(::testing::Test::HasFailure()) << "request " << request;
    const TierStats stats = (*kv)->Stats().tiers;
    ASSERT_EQ(static_cast<int64_t>(host.size()), stats.host_blocks) << "request " << request;
    ASSERT_EQ(static_cast<int64_t>(disk.size()), stats.disk_blocks) << "request " << request;
    ASSERT_LE(device.size(), 4u);
    for (uint64_t k : host) ASSERT_FALSE(disk.contains(k)) << "key " << k << " in two tiers";
  }
}

TEST(KvEventsTest, NothingWithPrefixReuseOff) {
  KvManagerConfig config;
  config.target.layout =
      BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = kTpb};
  config.target.num_blocks = 8;
  config.target.enable_prefix_reuse = false;
  absl::StatusOr<std::unique_ptr<KvManager>> kv = KvManager::Create(config);
  ASSERT_THAT(kv, IsOk());
  KvEventLog log;
  (*kv)->SetEventObserver(&log);
  Serve(**kv, 1, Tokens(3 * kTpb, 0));
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace lockstep::kv

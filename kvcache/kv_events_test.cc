#include "kvcache/kv_events.h"

#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/kv_manager.h"
#include "kvcache/prefix_hash.h"

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

std::vector<int32_t> Tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
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

// KV events through the executor: every rank's radix-tree keys reach the leader's sink
// at the step's response gather, per rank, and replaying them gives each rank's tree.
#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "kvcache/kv_events.h"
#include "kvcache/prefix_hash.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {
namespace {

// Replays every rank's deltas (evicted, then committed) into a key set per rank.
class ReplayingSink : public kv::KvEventSink {
 public:
  void OnKvEvents(absl::Span<const kv::KvEventDelta> per_rank) override {
    absl::MutexLock lock(&mu_);
    if (keys_.size() < per_rank.size()) keys_.resize(per_rank.size());
    ++calls_;
    for (size_t r = 0; r < per_rank.size(); ++r) {
      for (uint64_t k : per_rank[r].evicted) {
        if (keys_[r].erase(k) == 0) ++unknown_evictions_;
      }
      keys_[r].insert(per_rank[r].committed.begin(), per_rank[r].committed.end());
    }
  }
  std::set<uint64_t> keys(size_t rank) const {
    absl::MutexLock lock(&mu_);
    return rank < keys_.size() ? keys_[rank] : std::set<uint64_t>();
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  int unknown_evictions() const {
    absl::MutexLock lock(&mu_);
    return unknown_evictions_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::set<uint64_t>> keys_ ABSL_GUARDED_BY(mu_);
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  int unknown_evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

constexpr int kTpb = 4;

TEST(KvEventsTest, EachRanksKeysReachTheLeaderAsItsChain) {
  ReplayingSink sink;
  ClusterOptions o;
  o.ranks = 2;
  o.tokens_per_block = kTpb;
  o.num_blocks = 64;
  o.kv_events = true;
  o.kv_event_sink = &sink;
  ScriptedCluster cluster(o);
  const exec::NewRequestSpec spec = cluster.MakeRequest(1, 3 * kTpb + 1, 2, /*pinned_rank=*/1);
  const std::vector<int32_t> prompt = spec.prompt;
  cluster.Submit(spec);
  ASSERT_TRUE(cluster.StepUntil([&] { return cluster.AllFinished(1); }, 200));
  const uint64_t salt = cluster.rank(1).config().kv.target.reuse_salt;
  const std::vector<uint64_t> chain = kv::PrefixHashChain(salt, kTpb, prompt);
  const std::set<uint64_t> held = sink.keys(1);
  for (uint64_t key : chain) EXPECT_TRUE(held.contains(key)) << "a prompt block is missing";
  // The rest are the blocks the generated tokens filled, chained from the prompt.
  std::vector<int32_t> sequence = prompt;
  const Stream s = cluster.stream(RequestId(1));
  sequence.insert(sequence.end(), s.tokens.begin(), s.tokens.end());
  const std::vector<uint64_t> full = kv::PrefixHashChain(salt, kTpb, sequence);
  for (uint64_t key : held) {
    EXPECT_NE(std::find(full.begin(), full.end(), key), full.end()) << "a key of no block";
  }
  EXPECT_TRUE(sink.keys(0).empty());
  EXPECT_GT(sink.calls(), 0);
}

// A pool too small for every prompt evicts; at rest the replayed set of each rank is
// exactly as large as its tree (every node is evictable then), and no eviction names a
// key that was never committed.
TEST(KvEventsTest, EvictionsKeepTheReplayEqualToTheTree) {
  ReplayingSink sink;
  ClusterOptions o;
  o.ranks = 2;
  o.tokens_per_block = kTpb;
  o.num_blocks = 24;
  o.kv_events = true;
  o.kv_event_sink = &sink;
  ScriptedCluster cluster(o);
  for (int64_t id = 1; id <= 12; ++id) {
    cluster.Submit(cluster.MakeRequest(id, 4 * kTpb + 2, 3, static_cast<int>(id % 2)));
    ASSERT_TRUE(cluster.StepUntil([&] { return cluster.AllFinished(id); }, 200)) << id;
  }
  ASSERT_TRUE(cluster.StepUntil([&] { return cluster.rank(0).idle(); }, 20));
  for (int r = 0; r < 2; ++r) {
    const kv::ManagerStats stats = cluster.rank(r).kv().Stats();
    EXPECT_GT(stats.evicted_blocks, 0) << "rank " << r << ": the test needs evictions";
    EXPECT_EQ(static_cast<int64_t>(sink.keys(r).size()), stats.target.cached_blocks)
        << "rank " << r;
  }
  EXPECT_EQ(sink.unknown_evictions(), 0);
}

}  // namespace
}  // namespace lockstep::testing

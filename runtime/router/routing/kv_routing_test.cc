#include "runtime/router/routing/kv_routing.h"
#include "kvcache/testing/token_run.h"

#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kvcache/prefix_hash.h"

namespace lockstep::router {
namespace {

using ::lockstep::kv::Tokens;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr uint64_t kSalt = 42;
constexpr int kTpb = 4;

v1::ReportKvEventsRequest Report(const std::string& instance, int tpb = kTpb,
                                 uint64_t incarnation = 1) {
  v1::ReportKvEventsRequest r;
  r.set_instance(instance);
  r.set_incarnation(incarnation);
  r.set_hash_salt(kSalt);
  r.set_tokens_per_block(tpb);
  return r;
}

// Adds a batch committing the first `blocks` keys of `tokens`' chain on `rank`.
void Commit(v1::ReportKvEventsRequest& r, int32_t rank, uint64_t seq,
            const std::vector<int32_t>& tokens, size_t blocks) {
  const std::vector<uint64_t> chain =
      kv::PrefixHashChain(r.hash_salt(), r.tokens_per_block(), tokens);
  v1::KvEventBatch* b = r.add_batches();
  b->set_rank(rank);
  b->set_seq(seq);
  for (size_t i = 0; i < blocks && i < chain.size(); ++i) b->add_committed(chain[i]);
}

std::vector<KvCandidate> Candidates(std::initializer_list<const char*> names) {
  std::vector<KvCandidate> out;
  for (const char* name : names) out.push_back({.name = name});
  return out;
}

// The report's tiers reach the index (batches and snapshots), and the prefix a rank
// holds only in its host tier counts below one on another rank's device.
TEST(KvRoutingTest, TheTiersOfAReportReachTheIndexAndTheScore) {
  KvRouting kv({});
  const std::vector<int32_t> prompt = Tokens(5 * kTpb, 10);
  const std::vector<uint64_t> chain = kv::PrefixHashChain(kSalt, kTpb, prompt);
  v1::ReportKvEventsRequest r = Report("agg0");
  Commit(r, 0, 1, prompt, 2);             // rank 0: 2 blocks on the device
  v1::KvEventBatch* b = r.add_batches();  // rank 1: 4 blocks in its host tier, 1 on disk
  b->set_rank(1);
  b->set_seq(1);
  for (int i = 0; i < 4; ++i) b->add_host_stored(chain[static_cast<size_t>(i)]);
  b->add_disk_stored(chain[4]);
  v1::KvEventSnapshot* s = r.add_snapshots();  // rank 2: a snapshot with a host block
  s->set_rank(2);
  s->set_seq(0);
  s->add_host_keys(chain[0]);
  ASSERT_THAT(kv.Apply(r), IsOk());
  EXPECT_THAT(kv.KeysOf("agg0", 1, KvTier::kHost), ::testing::SizeIs(4));
  EXPECT_THAT(kv.KeysOf("agg0", 1, KvTier::kDisk), ElementsAre(chain[4]));
  EXPECT_THAT(kv.KeysOf("agg0", 2, KvTier::kHost), ElementsAre(chain[0]));
  std::vector<KvCandidate> c = Candidates({"agg0"});
  // The prompt minus its last token: 4 full blocks, all on rank 1's host tier (weighted
  // 0.5 x 16 = 8 tokens) against rank 0's 2 device blocks (8 tokens): a tie, no hint.
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_rank, -1);
  EXPECT_EQ(c[0].cached_by_rank, (std::vector<int64_t>{2 * kTpb, 4 * kTpb, kTpb}));
  // Host hits worth more: rank 1.
  kv.FillPrefixes(prompt, &c, {.host_hit = 0.75});
  EXPECT_EQ(c[0].cached_rank, 1);
  EXPECT_EQ(c[0].cached_tokens, 4 * kTpb);
  EXPECT_EQ(c[0].cached_host_tokens, 4 * kTpb);
  EXPECT_EQ(c[0].cached_disk_tokens, 0);
}

TEST(KvRoutingTest, FindsTheRankHoldingThePromptsPrefix) {
  KvRouting kv({});
  const std::vector<int32_t> prompt = Tokens(5 * kTpb, 10);
  v1::ReportKvEventsRequest r = Report("agg0");
  Commit(r, 1, 1, prompt, 3);
  Commit(r, 0, 1, prompt, 1);
  absl::StatusOr<v1::ReportKvEventsResponse> answer = kv.Apply(r);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), IsEmpty());
  std::vector<KvCandidate> c = Candidates({"agg0", "agg1"});
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 3 * kTpb);
  EXPECT_EQ(c[0].cached_rank, 1);
  EXPECT_EQ(c[0].cached_by_rank, (std::vector<int64_t>{kTpb, 3 * kTpb}));
  EXPECT_EQ(c[1].cached_tokens, 0);  // never reported
  const KvRoutingStats stats = kv.Stats();
  EXPECT_EQ(stats.keys, 3);
  EXPECT_EQ(stats.batches, 2);
  ASSERT_EQ(stats.sources.size(), 2u);
  EXPECT_EQ(stats.sources[1].keys, 3);
}

TEST(KvRoutingTest, OnlyThePromptMinusItsLastTokenCounts) {
  KvRouting kv({});
  const std::vector<int32_t> prompt = Tokens(2 * kTpb, 0);  // two full blocks
  v1::ReportKvEventsRequest r = Report("agg0");
  Commit(r, 0, 1, prompt, 2);
  ASSERT_THAT(kv.Apply(r), IsOk());
  std::vector<KvCandidate> c = Candidates({"agg0"});
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, kTpb);  // a worker reuses the first block only
  std::vector<int32_t> longer = prompt;
  longer.push_back(7);
  kv.FillPrefixes(longer, &c);
  EXPECT_EQ(c[0].cached_tokens, 2 * kTpb);
}

TEST(KvRoutingTest, AGapAsksForASnapshotThatRestoresTheRank) {
  KvRouting kv({});
  const std::vector<int32_t> prompt = Tokens(4 * kTpb, 3);
  v1::ReportKvEventsRequest first = Report("agg0");
  Commit(first, 0, 1, prompt, 1);
  ASSERT_THAT(kv.Apply(first), IsOk());
  v1::ReportKvEventsRequest late = Report("agg0");
  Commit(late, 0, 3, prompt, 2);  // batch 2 was lost
  absl::StatusOr<v1::ReportKvEventsResponse> answer = kv.Apply(late);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), ElementsAre(0));
  std::vector<KvCandidate> c = Candidates({"agg0"});
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 0);  // forgotten until the snapshot
  EXPECT_EQ(kv.Stats().resyncs, 1);

  v1::ReportKvEventsRequest snapshot = Report("agg0");
  v1::KvEventSnapshot* s = snapshot.add_snapshots();
  s->set_rank(0);
  s->set_seq(3);
  for (uint64_t key : kv::PrefixHashChain(kSalt, kTpb, prompt)) s->add_keys(key);
  ASSERT_THAT(kv.Apply(snapshot), IsOk());
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 4 * kTpb - kTpb);  // all but the block of the last token
  EXPECT_EQ(kv.Stats().snapshots, 1);

  // A router that never saw the instance (e.g. it restarted) asks for a snapshot too.
  KvRouting fresh({});
  v1::ReportKvEventsRequest mid = Report("agg0");
  Commit(mid, 1, 9, prompt, 1);
  answer = fresh.Apply(mid);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), ElementsAre(1));
}

TEST(KvRoutingTest, RemovedInstancesHoldNothingAndSchemesStayApart) {
  KvRouting kv({});
  const std::vector<int32_t> prompt = Tokens(6 * kTpb, 0);
  v1::ReportKvEventsRequest a = Report("a");
  Commit(a, 0, 1, prompt, 2);
  v1::ReportKvEventsRequest b = Report("b", /*tpb=*/2 * kTpb);  // another block size
  Commit(b, 0, 1, prompt, 2);
  ASSERT_THAT(kv.Apply(a), IsOk());
  ASSERT_THAT(kv.Apply(b), IsOk());
  std::vector<KvCandidate> c = Candidates({"a", "b"});
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 2 * kTpb);
  EXPECT_EQ(c[1].cached_tokens, 4 * kTpb);  // two blocks of 8
  kv.RemoveInstance("b");
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 2 * kTpb);
  EXPECT_EQ(c[1].cached_tokens, 0);
  EXPECT_EQ(kv.Stats().keys, 2);
}

// An idle rank publishes no batch, so after the router dropped the instance (or
// restarted) only a snapshot can show what it holds: the first report of an incarnation
// the router does not know asks every rank of the instance for one.
TEST(KvRoutingTest, AnUnknownIncarnationAsksEveryRankForASnapshot) {
  KvRouting kv({});
  const std::vector<int32_t> prompt = Tokens(4 * kTpb, 5);
  v1::ReportKvEventsRequest first = Report("agg0");
  first.set_world_size(3);
  Commit(first, 1, 1, prompt, 2);
  absl::StatusOr<v1::ReportKvEventsResponse> answer = kv.Apply(first);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), ElementsAre(0, 1, 2));
  // Known now: the next report asks for nothing.
  v1::ReportKvEventsRequest next = Report("agg0");
  next.set_world_size(3);
  Commit(next, 1, 2, prompt, 3);
  answer = kv.Apply(next);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), IsEmpty());

  // The instance is dropped (it re-registered) while rank 1 holds the prompt and stays
  // idle; rank 0's next batch brings the same incarnation back.
  kv.RemoveInstance("agg0");
  v1::ReportKvEventsRequest after = Report("agg0");
  after.set_world_size(3);
  Commit(after, 0, 1, Tokens(2 * kTpb, 900), 1);
  answer = kv.Apply(after);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), ElementsAre(0, 1, 2));
  std::vector<KvCandidate> c = Candidates({"agg0"});
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 0);  // not known until rank 1's snapshot
  v1::ReportKvEventsRequest snapshot = Report("agg0");
  snapshot.set_world_size(3);
  v1::KvEventSnapshot* s = snapshot.add_snapshots();
  s->set_rank(1);
  s->set_seq(2);
  const std::vector<uint64_t> chain = kv::PrefixHashChain(kSalt, kTpb, prompt);
  for (size_t i = 0; i < 3; ++i) s->add_keys(chain[i]);
  answer = kv.Apply(snapshot);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), IsEmpty());
  kv.FillPrefixes(prompt, &c);
  EXPECT_EQ(c[0].cached_tokens, 3 * kTpb);
  EXPECT_EQ(c[0].cached_rank, 1);
}

TEST(KvRoutingTest, AMalformedReportIsRefusedNamingIt) {
  KvRouting kv({});
  v1::ReportKvEventsRequest r = Report("agg0", /*tpb=*/0);
  EXPECT_THAT(kv.Apply(r), StatusIs(absl::StatusCode::kInvalidArgument,
                                    ::testing::HasSubstr("tokens_per_block")));
  r = Report("");
  EXPECT_THAT(kv.Apply(r), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockstep::router

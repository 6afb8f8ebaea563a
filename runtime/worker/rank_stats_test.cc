#include "runtime/worker/rank_stats.h"

#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

TEST(RankStatsTest, EveryInstanceCounterOnItsField) {
  exec::ExecutorSnapshot snapshot;
  exec::ExecutorCounters& c = snapshot.instance_counters;
  c.steps = 1;
  c.vetoed_steps = 2;
  c.padded_steps = 3;
  c.deferred_updates = 4;
  c.stale_updates = 5;
  snapshot.active_requests = 6;
  snapshot.queued_requests = 7;
  c.drafts_proposed = 8;
  c.drafts_accepted = 9;
  c.prompt_tokens = 10;
  c.generated_tokens = 11;
  c.audit_violations = 12;
  c.kv_bytes_received = 13;
  c.kv_receive_micros = 14;
  c.transfers_received = 15;
  c.transfers_sent = 16;
  c.transfer_failures = 17;
  c.errors = 18;
  c.error_steps = 19;
  c.dummy_updates_dropped = 20;
  c.engine_failures = 21;
  c.paused = 22;
  v1::StatsResponse out;
  SetInstanceCounters(snapshot, &out);
  EXPECT_EQ(out.steps(), 1);
  EXPECT_EQ(out.vetoed_steps(), 2);
  EXPECT_EQ(out.padded_steps(), 3);
  EXPECT_EQ(out.deferred_updates(), 4);
  EXPECT_EQ(out.stale_updates(), 5);
  EXPECT_EQ(out.active_requests(), 6);
  EXPECT_EQ(out.queued_requests(), 7);
  EXPECT_EQ(out.draft_tokens_proposed(), 8);
  EXPECT_EQ(out.draft_tokens_accepted(), 9);
  EXPECT_EQ(out.prompt_tokens(), 10);
  EXPECT_EQ(out.generated_tokens(), 11);
  EXPECT_EQ(out.audit_violations(), 12);
  EXPECT_EQ(out.kv_bytes_received(), 13);
  EXPECT_EQ(out.kv_receive_micros(), 14);
  EXPECT_EQ(out.transfers_received(), 15);
  EXPECT_EQ(out.transfers_sent(), 16);
  EXPECT_EQ(out.transfer_failures(), 17);
  EXPECT_EQ(out.rank_errors(), 18);
  EXPECT_EQ(out.error_steps(), 19);
  EXPECT_EQ(out.dummy_updates_dropped(), 20);
  EXPECT_EQ(out.engine_failures(), 21);
  EXPECT_EQ(out.paused_requests(), 22);
  // Every scalar int64 field of StatsResponse is one of the above, or set by SetKvShape:
  // a counter added to the message and not to SetInstanceCounters fails here.
  const std::set<std::string> elsewhere = {"kv_tokens_per_block", "kv_bytes_per_token"};
  const google::protobuf::Descriptor* d = v1::StatsResponse::descriptor();
  const google::protobuf::Reflection* r = v1::StatsResponse::GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->is_repeated() || f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_INT64 ||
        elsewhere.count(f->name()) > 0) {
      continue;
    }
    EXPECT_NE(r->GetInt64(out, f), 0) << f->name() << " is not set by SetInstanceCounters";
  }
}

TEST(RankStatsTest, EveryRankInOrderAndTheImbalance) {
  exec::ExecutorSnapshot snapshot;
  snapshot.ranks = {{2, 300, 1000, 500, 120}, {0, 0, 4000, 80, 0}};
  snapshot.token_imbalance = 2.0;
  v1::StatsResponse out;
  SetRankStats(snapshot, &out);
  ASSERT_EQ(out.ranks_size(), 2);
  EXPECT_EQ(out.ranks(0).rank(), 0);
  EXPECT_EQ(out.ranks(0).active_requests(), 2);
  EXPECT_EQ(out.ranks(0).active_tokens(), 300);
  EXPECT_EQ(out.ranks(0).free_kv_tokens(), 1000);
  EXPECT_EQ(out.ranks(0).prompt_tokens(), 500);
  EXPECT_EQ(out.ranks(0).prefix_tokens_reused(), 120);
  EXPECT_EQ(out.ranks(1).rank(), 1);
  EXPECT_EQ(out.ranks(1).prompt_tokens(), 80);
  EXPECT_EQ(out.ranks(1).prefix_tokens_reused(), 0);
  EXPECT_DOUBLE_EQ(out.active_token_imbalance(), 2.0);
  EXPECT_EQ(out.ranks(0).tiers().host_capacity_blocks(), 0);  // no tiers
}

TEST(RankStatsTest, EveryRanksTiers) {
  exec::ExecutorSnapshot snapshot;
  snapshot.ranks.resize(2);
  snapshot.ranks[1].tiers = {.block_bytes = 4096,
                             .host_blocks = 7,
                             .host_capacity_blocks = 64,
                             .disk_blocks = 3,
                             .disk_capacity_blocks = 256,
                             .host_hit_blocks = 11,
                             .disk_hit_blocks = 5,
                             .offloaded_blocks = 20,
                             .offload_ns = 9'000'999,
                             .onboard_ns = 2'500'000,
                             .disk_corrupt = 1,
                             .pinned_blocks = 6,
                             .served_blocks = 13,
                             .stuck_jobs = 1};
  v1::StatsResponse out;
  SetRankStats(snapshot, &out);
  ASSERT_EQ(out.ranks_size(), 2);
  const v1::KvTierStats& t = out.ranks(1).tiers();
  EXPECT_EQ(t.block_bytes(), 4096);
  EXPECT_EQ(t.host_blocks(), 7);
  EXPECT_EQ(t.host_capacity_blocks(), 64);
  EXPECT_EQ(t.disk_blocks(), 3);
  EXPECT_EQ(t.disk_capacity_blocks(), 256);
  EXPECT_EQ(t.host_hit_blocks(), 11);
  EXPECT_EQ(t.disk_hit_blocks(), 5);
  EXPECT_EQ(t.offloaded_blocks(), 20);
  EXPECT_EQ(t.offload_micros(), 9000);
  EXPECT_EQ(t.onboard_micros(), 2500);
  EXPECT_EQ(t.disk_corrupt_blocks(), 1);
  EXPECT_EQ(t.pinned_blocks(), 6);
  EXPECT_EQ(t.served_blocks(), 13);
  EXPECT_EQ(t.stuck_jobs(), 1);
  EXPECT_EQ(out.ranks(0).tiers().host_blocks(), 0);
}

TEST(RankStatsTest, KvShapeOfAnMlaLatentCache) {
  // DeepSeek-V3: 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64 = 576 latent values
  // per token and layer, cached as one head's K and V halves of 288, in bf16.
  const kv::BlockLayout dsv3{.num_layers = 61,
                             .num_kv_heads = 1,
                             .head_dim = 288,
                             .tokens_per_block = 64,
                             .element_bytes = 2};
  v1::StatsResponse out;
  SetKvShape(dsv3, &out);
  EXPECT_EQ(out.kv_tokens_per_block(), 64);
  EXPECT_EQ(out.kv_bytes_per_token(), (512 + 64) * 61 * 2);  // 70272: about 70 KB
}

TEST(RankStatsTest, KvShapeOfPlainAttention) {
  // 4 layers x {K, V} x 2 heads x 16 dims x f32.
  v1::StatsResponse out;
  SetKvShape({.num_layers = 4, .num_kv_heads = 2, .head_dim = 16, .tokens_per_block = 8}, &out);
  EXPECT_EQ(out.kv_tokens_per_block(), 8);
  EXPECT_EQ(out.kv_bytes_per_token(), 4 * 2 * 2 * 16 * 4);
}

}  // namespace
}  // namespace lockstep::worker

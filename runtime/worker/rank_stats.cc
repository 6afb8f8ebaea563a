#include "runtime/worker/rank_stats.h"

namespace lockstep::worker {

void SetInstanceCounters(const exec::ExecutorSnapshot& snapshot, v1::StatsResponse* out) {
  const exec::ExecutorCounters& c = snapshot.instance_counters;
  out->set_steps(c.steps);
  out->set_vetoed_steps(c.vetoed_steps);
  out->set_padded_steps(c.padded_steps);
  out->set_deferred_updates(c.deferred_updates);
  out->set_stale_updates(c.stale_updates);
  out->set_active_requests(snapshot.active_requests);
  out->set_queued_requests(snapshot.queued_requests);
  out->set_draft_tokens_proposed(c.drafts_proposed);
  out->set_draft_tokens_accepted(c.drafts_accepted);
  out->set_prompt_tokens(c.prompt_tokens);
  out->set_generated_tokens(c.generated_tokens);
  out->set_audit_violations(c.audit_violations);
  out->set_kv_bytes_received(c.kv_bytes_received);
  out->set_kv_receive_micros(c.kv_receive_micros);
  out->set_transfers_received(c.transfers_received);
  out->set_transfers_sent(c.transfers_sent);
  out->set_transfer_failures(c.transfer_failures);
  out->set_rank_errors(c.errors);
  out->set_error_steps(c.error_steps);
  out->set_dummy_updates_dropped(c.dummy_updates_dropped);
  out->set_engine_failures(c.engine_failures);
  out->set_paused_requests(c.paused);
}

void SetRankStats(const exec::ExecutorSnapshot& snapshot, v1::StatsResponse* out) {
  for (size_t r = 0; r < snapshot.ranks.size(); ++r) {
    const exec::RankView& view = snapshot.ranks[r];
    v1::RankStats* rank = out->add_ranks();
    rank->set_rank(static_cast<int32_t>(r));
    rank->set_active_requests(view.active_requests);
    rank->set_active_tokens(view.active_tokens);
    rank->set_free_kv_tokens(view.free_kv_tokens);
    rank->set_prompt_tokens(view.context_tokens);
    rank->set_prefix_tokens_reused(view.reused_tokens);
    const exec::RankView::Tiers& t = view.tiers;
    v1::KvTierStats* tiers = rank->mutable_tiers();
    tiers->set_block_bytes(t.block_bytes);
    tiers->set_host_blocks(t.host_blocks);
    tiers->set_host_capacity_blocks(t.host_capacity_blocks);
    tiers->set_disk_blocks(t.disk_blocks);
    tiers->set_disk_capacity_blocks(t.disk_capacity_blocks);
    tiers->set_host_hit_blocks(t.host_hit_blocks);
    tiers->set_disk_hit_blocks(t.disk_hit_blocks);
    tiers->set_offloaded_blocks(t.offloaded_blocks);
    tiers->set_offload_micros(t.offload_ns / 1000);
    tiers->set_onboard_micros(t.onboard_ns / 1000);
    tiers->set_disk_corrupt_blocks(t.disk_corrupt);
    tiers->set_pinned_blocks(t.pinned_blocks);
    tiers->set_served_blocks(t.served_blocks);
    tiers->set_stuck_jobs(t.stuck_jobs);
  }
  out->set_active_token_imbalance(snapshot.token_imbalance);
}

void SetKvShape(const kv::BlockLayout& layout, v1::StatsResponse* out) {
  out->set_kv_tokens_per_block(layout.tokens_per_block);
  out->set_kv_bytes_per_token(
      static_cast<int64_t>(layout.BlockBytes() / static_cast<size_t>(layout.tokens_per_block)));
}

}  // namespace lockstep::worker

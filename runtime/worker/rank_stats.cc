#include "runtime/worker/rank_stats.h"

namespace lockstep::worker {

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
  }
  out->set_active_token_imbalance(snapshot.token_imbalance);
}

}  // namespace lockstep::worker

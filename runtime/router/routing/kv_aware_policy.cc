#include "runtime/router/routing/kv_aware_policy.h"

#include <algorithm>

#include "common/check.h"

namespace lockstep::router {

std::string_view RoutingReasonName(RoutingReason reason) {
  switch (reason) {
    case RoutingReason::kPrefix:
      return "prefix";
    case RoutingReason::kLoad:
      return "load";
    case RoutingReason::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

double WeightedCachedTokens(const KvAwareWeights& weights, const KvCandidate& c) {
  const int64_t device = c.cached_tokens - c.cached_host_tokens - c.cached_disk_tokens;
  return static_cast<double>(device) +
         weights.host_hit * static_cast<double>(c.cached_host_tokens) +
         weights.disk_hit * static_cast<double>(c.cached_disk_tokens);
}

void ApplyPrefixMatches(absl::Span<const KvPrefixMatch> matches, int tokens_per_block,
                        int64_t max_tokens, KvCandidate& c, const KvAwareWeights& weights) {
  c.cached_tokens = 0;
  c.cached_host_tokens = 0;
  c.cached_disk_tokens = 0;
  c.cached_rank = -1;
  c.cached_by_rank.clear();
  double best = 0;
  for (const KvPrefixMatch& m : matches) {
    if (m.instance != c.name || m.rank < 0) continue;
    const int64_t tokens = std::min(m.blocks * tokens_per_block, max_tokens);
    // The lower tiers hold the chain's tail: the device's blocks come first.
    const int64_t disk = std::min(m.disk_blocks * tokens_per_block, tokens);
    const int64_t host = std::min(m.host_blocks * tokens_per_block, tokens - disk);
    if (static_cast<size_t>(m.rank) >= c.cached_by_rank.size()) {
      c.cached_by_rank.resize(static_cast<size_t>(m.rank) + 1, 0);
    }
    c.cached_by_rank[static_cast<size_t>(m.rank)] = tokens;
    const KvCandidate mine{
        .cached_tokens = tokens, .cached_host_tokens = host, .cached_disk_tokens = disk};
    const double weighted = WeightedCachedTokens(weights, mine);
    if (weighted > best || (c.cached_tokens == 0 && tokens > 0 && weighted == best)) {
      best = weighted;
      c.cached_tokens = tokens;
      c.cached_host_tokens = host;
      c.cached_disk_tokens = disk;
      c.cached_rank = m.rank;
    } else if (weighted == best && tokens > 0) {
      c.cached_rank = -1;  // a tie: no rank is the place for it
    }
  }
}

void ApplyPrefixMatches(absl::Span<const KvPrefixMatch> matches, int tokens_per_block,
                        int64_t max_tokens, std::vector<KvCandidate>* candidates,
                        const KvAwareWeights& weights) {
  for (KvCandidate& c : *candidates) {
    ApplyPrefixMatches(matches, tokens_per_block, max_tokens, c, weights);
  }
}

KvAwareDecision PickKvAware(const KvAwareWeights& weights,
                            const std::vector<KvCandidate>& candidates, int64_t prompt_tokens,
                            uint64_t* cursor) {
  LOCKSTEP_CHECK(!candidates.empty()) << "no candidates to pick from";
  LOCKSTEP_CHECK(prompt_tokens >= 1) << "prompt_tokens " << prompt_tokens;
  const size_t n = candidates.size();
  const size_t start = static_cast<size_t>((*cursor)++ % n);
  int64_t max_load = 0;
  int64_t max_free = 0;
  for (const KvCandidate& c : candidates) {
    max_load = std::max(max_load, c.in_flight + c.queued);
    max_free = std::max(max_free, c.free_blocks);
  }
  const auto score = [&](const KvCandidate& c) {
    const double hit = WeightedCachedTokens(weights, c) / static_cast<double>(prompt_tokens);
    const double load =
        static_cast<double>(c.in_flight + c.queued) / static_cast<double>(max_load + 1);
    const double short_of_kv =
        max_free > 0 ? 1.0 - static_cast<double>(std::max<int64_t>(c.free_blocks, 0)) /
                                 static_cast<double>(max_free)
                     : 0.0;
    return weights.prefix * hit - weights.load * load - weights.free * short_of_kv;
  };
  // Scan from the round-robin start so ties rotate.
  size_t best = start;
  double best_score = score(candidates[start]);
  for (size_t k = 1; k < n; ++k) {
    const size_t i = (start + k) % n;
    const double s = score(candidates[i]);
    if (s > best_score ||
        (s == best_score && candidates[i].free_blocks > candidates[best].free_blocks)) {
      best = i;
      best_score = s;
    }
  }
  const KvCandidate& chosen = candidates[best];
  KvAwareDecision decision{.index = best};
  if (chosen.cached_tokens > 0) {
    decision.rank_hint = chosen.cached_rank;
    decision.reason = RoutingReason::kPrefix;
    decision.cached_tokens = chosen.cached_tokens;
  }
  return decision;
}

}  // namespace lockstep::router

// The kv_aware routing policy: send a request where the longest prefix of its prompt is
// already cached, unless that instance is much busier than the others.
//
//   score = prefix_weight * weighted cached_tokens / prompt_tokens
//         - load_weight * load / (max load among candidates + 1)
//         - free_weight * (1 - free_blocks / max free_blocks among candidates)
//
// where load = requests this router has in flight there + requests it last reported
// queued, cached_tokens is the longest prefix any of its ranks holds (from the
// KvPrefixIndex; weighted: a token its device pool holds counts 1, one only its host
// tier holds host_hit, one only its disk tier holds disk_hit — brought back, not
// recomputed, but not free either; the rank with the most weighted tokens is the one
// that counts) and free_blocks its last reported free target-pool blocks (the last
// term is 0 when no candidate reported any). The highest score wins; ties go to the most
// free KV blocks, then round robin. The decision names the rank holding the prefix as a hint for
// the instance's rank assignment — only when one rank holds more than every other: a prefix several
// ranks hold alike (a shared system prompt) gives no hint, so the instance balances
// among them. With no prefix cached anywhere this is least_load (plus queues).
//
// Pure functions of their inputs (the cursor is passed in).
#ifndef LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_AWARE_POLICY_H_
#define LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_AWARE_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "runtime/router/routing/kv_prefix_index.h"

namespace lockstep::router {

struct KvAwareWeights {
  double prefix = 1.0;
  double load = 0.5;
  double free = 0.25;
  // What a cached token is worth below the device, against 1 on the device and 0 for a
  // miss (router.kv_host_hit_weight, router.kv_disk_hit_weight).
  double host_hit = 0.5;
  double disk_hit = 0.25;
};

// Why an instance was chosen, for the routing-decision metric.
// kPrefix: kv_aware chose an instance holding part of the prompt; kLoad: least_load, or
// kv_aware where nothing is cached; kRoundRobin: round_robin.
enum class RoutingReason { kPrefix, kLoad, kRoundRobin };
std::string_view RoutingReasonName(RoutingReason reason);

struct KvCandidate {
  std::string name;
  int64_t in_flight = 0;      // requests this router has outstanding there
  int64_t queued = 0;         // last reported queued requests
  int64_t free_blocks = 0;    // last reported, target pool, all ranks
  int64_t cached_tokens = 0;  // the best cached prefix of the prompt on one rank
  // Of cached_tokens, those only that rank's host / disk tier holds.
  int64_t cached_host_tokens = 0;
  int64_t cached_disk_tokens = 0;
  // The one rank holding cached_tokens; -1 when nothing is cached or several ranks
  // hold as much (weighted).
  int32_t cached_rank = -1;
  std::vector<int64_t> cached_by_rank;  // cached prefix tokens per rank (index = rank)
};

struct KvAwareDecision {
  size_t index = 0;        // into the candidates
  int32_t rank_hint = -1;  // the rank holding the prefix; -1: none
  RoutingReason reason = RoutingReason::kLoad;
  int64_t cached_tokens = 0;
};

// Sets cached_tokens (with its host and disk shares), cached_rank and cached_by_rank
// of a candidate from the index's matches for a prompt's chain (those of other
// instances are skipped), each rank's at most `max_tokens`; the best rank is the one
// with the most tokens weighted by tier (`weights`).
void ApplyPrefixMatches(absl::Span<const KvPrefixMatch> matches, int tokens_per_block,
                        int64_t max_tokens, KvCandidate& candidate,
                        const KvAwareWeights& weights = {});
// The same for each candidate (by name).
void ApplyPrefixMatches(absl::Span<const KvPrefixMatch> matches, int tokens_per_block,
                        int64_t max_tokens, std::vector<KvCandidate>* candidates,
                        const KvAwareWeights& weights = {});

// A candidate's cached tokens weighted by tier.
double WeightedCachedTokens(const KvAwareWeights& weights, const KvCandidate& candidate);

// `candidates` sorted by name, non-empty; `prompt_tokens` >= 1. Advances `*cursor`.
KvAwareDecision PickKvAware(const KvAwareWeights& weights,
                            const std::vector<KvCandidate>& candidates, int64_t prompt_tokens,
                            uint64_t* cursor);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_ROUTING_KV_AWARE_POLICY_H_

#include "scheduler/rank_assignment.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

namespace lockstep::sched {
namespace {

// `load` after a request of `prompt` tokens was assigned to it.
void Add(RankLoad& load, int64_t prompt) {
  load.active_requests += 1;
  load.active_tokens += prompt;
  if (load.free_kv_tokens != RankLoad::kUnknown) {
    load.free_kv_tokens = std::max<int64_t>(0, load.free_kv_tokens - prompt);
  }
}

}  // namespace

RankAssignment AssignRanks(absl::Span<const RankLoad> loads,
                           absl::Span<const NewRequest> new_requests, int64_t per_rank_cap) {
  const int num_ranks = static_cast<int>(loads.size());
  const int num_new = static_cast<int>(new_requests.size());
  RankAssignment out;
  out.rank_of.assign(num_new, -1);
  if (num_ranks == 0) {
    out.queued.resize(num_new);
    std::iota(out.queued.begin(), out.queued.end(), 0);
    return out;
  }

  std::vector<RankLoad> load(loads.begin(), loads.end());
  int64_t total_active = 0;
  int64_t max_active = 0;
  for (const RankLoad& l : load) {
    total_active += l.active_requests;
    max_active = std::max(max_active, l.active_requests);
  }

  // 1. Pinned requests, in leader order.
  std::vector<int32_t> unpinned;
  unpinned.reserve(num_new);
  for (int i = 0; i < num_new; ++i) {
    const std::optional<int32_t>& pin = new_requests[i].pinned_rank;
    if (!pin.has_value()) {
      unpinned.push_back(i);
      continue;
    }
    if (*pin >= 0 && *pin < num_ranks && load[*pin].active_requests < per_rank_cap) {
      out.rank_of[i] = *pin;
      Add(load[*pin], new_requests[i].prompt_tokens);
    }
  }
  // Then hinted requests, in leader order; a hint to a full rank is dropped.
  std::vector<int32_t> unhinted;
  unhinted.reserve(unpinned.size());
  for (int32_t i : unpinned) {
    const std::optional<int32_t>& hint = new_requests[i].preferred_rank;
    if (hint.has_value() && *hint >= 0 && *hint < num_ranks &&
        load[*hint].active_requests < per_rank_cap) {
      out.rank_of[i] = *hint;
      Add(load[*hint], new_requests[i].prompt_tokens);
    } else {
      unhinted.push_back(i);
    }
  }
  unpinned = std::move(unhinted);

  // 2. The expected active count per rank.
  const int64_t total = total_active + num_new;
  const int64_t balanced = (total + num_ranks - 1) / num_ranks;
  out.expected_per_rank = std::min(std::max(balanced, max_active), per_rank_cap);

  // 3. Longest prompts first, stable in leader order.
  std::stable_sort(unpinned.begin(), unpinned.end(), [&](int32_t a, int32_t b) {
    return new_requests[a].prompt_tokens > new_requests[b].prompt_tokens;
  });
  for (int32_t i : unpinned) {
    const int64_t prompt = new_requests[i].prompt_tokens;
    // Lexicographic preference; ties keep the lower rank id (scanned first).
    auto key = [&](int r) {
      return std::make_tuple(load[r].free_kv_tokens < prompt, load[r].active_tokens,
                             -load[r].free_kv_tokens, load[r].active_requests);
    };
    int best = -1;
    for (int r = 0; r < num_ranks; ++r) {
      if (load[r].active_requests >= out.expected_per_rank) continue;
      if (best < 0 || key(r) < key(best)) best = r;
    }
    if (best < 0) continue;
    out.rank_of[i] = best;
    Add(load[best], prompt);
  }

  // 4. Everything unassigned stays queued, in leader order.
  for (int i = 0; i < num_new; ++i) {
    if (out.rank_of[i] < 0) out.queued.push_back(i);
  }
  return out;
}

double TokenImbalance(absl::Span<const RankLoad> loads) {
  int64_t total = 0;
  int64_t most = 0;
  for (const RankLoad& l : loads) {
    total += l.active_tokens;
    most = std::max(most, l.active_tokens);
  }
  if (total <= 0) return 1.0;
  return static_cast<double>(most) * static_cast<double>(loads.size()) / static_cast<double>(total);
}

}  // namespace lockstep::sched

#include "runtime/eplb/plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"

namespace lockstep::eplb {
namespace {

// One node's part of a layer: its experts and its ranks (global ids).
struct Part {
  std::vector<int> experts;
  std::vector<int> ranks;
};

// Packs `count` items of the given weights into `bins` bins of `capacity` items each,
// heaviest first onto the lightest bin with room (ties: lower index). bin_of[item].
std::vector<int> PackEqual(const std::vector<double>& weights, int bins, int capacity) {
  std::vector<int> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return weights[a] > weights[b]; });
  std::vector<double> load(bins, 0.0);
  std::vector<int> used(bins, 0), bin_of(weights.size(), 0);
  for (int item : order) {
    int best = -1;
    for (int b = 0; b < bins; ++b) {
      if (used[b] < capacity && (best < 0 || load[b] < load[best])) best = b;
    }
    bin_of[item] = best;
    load[best] += weights[item];
    ++used[best];
  }
  return bin_of;
}

// Steps 2-4 for one part; writes slots[rank] for the part's ranks.
void PlanPart(const Part& part, const std::vector<double>& loads, int slots_per_rank,
              std::vector<std::vector<int>>& slots) {
  const int n = static_cast<int>(part.experts.size());
  const int ranks = static_cast<int>(part.ranks.size());
  // 2. Replicate.
  std::vector<int> copies(n, 1);
  int spare = std::min(ranks * slots_per_rank, n * ranks) - n;
  for (; spare > 0; --spare) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (copies[i] >= ranks) continue;
      if (best < 0 || loads[part.experts[i]] / copies[i] > loads[part.experts[best]] / copies[best])
        best = i;
    }
    ++copies[best];
  }
  // 3. Pack: replicated experts first (they need distinct ranks), then by share.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto share = [&](int i) { return loads[part.experts[i]] / copies[i]; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if ((copies[a] > 1) != (copies[b] > 1)) return copies[a] > 1;
    return share(a) > share(b);
  });
  std::vector<std::set<int>> held(ranks);  // local expert indices per local rank
  std::vector<double> rank_load(ranks, 0.0);
  const auto move = [&](int item, int from, int to) {
    held[from].erase(item);
    rank_load[from] -= share(item);
    held[to].insert(item);
    rank_load[to] += share(item);
  };
  for (int item : order) {
    for (int c = 0; c < copies[item]; ++c) {
      int best = -1;
      for (int r = 0; r < ranks; ++r) {
        if (static_cast<int>(held[r].size()) >= slots_per_rank || held[r].count(item)) continue;
        if (best < 0 || rank_load[r] < rank_load[best]) best = r;
      }
      if (best < 0) {
        // Every rank with room holds the item already: move another expert from a full
        // rank that lacks it into the room (one exists: the roomy rank holds fewer than
        // slots_per_rank experts, the item among them).
        int roomy = 0;
        while (static_cast<int>(held[roomy].size()) >= slots_per_rank) ++roomy;
        for (int r = 0; r < ranks && best < 0; ++r) {
          if (held[r].count(item)) continue;
          for (int other : held[r]) {
            if (!held[roomy].count(other)) {
              move(other, r, roomy);
              best = r;
              break;
            }
          }
        }
      }
      held[best].insert(item);
      rank_load[best] += share(item);
    }
  }
  // 4. Refine: local search on (max rank load, sum of squared rank loads), each step
  // the best change of the most loaded rank `top`: move one of its replicas to a rank
  // with a free slot, swap one with another rank's, or (for an expert with several
  // replicas) give the slot to another expert, which changes both experts' shares.
  const auto score = [&](const std::vector<int>& cp) {
    std::pair<double, double> s{0, 0};
    for (int r = 0; r < ranks; ++r) {
      double load = 0;
      for (int i : held[r]) load += loads[part.experts[i]] / cp[i];
      s.first = std::max(s.first, load);
      s.second += load * load;
    }
    return s;
  };
  const auto better = [](std::pair<double, double> a, std::pair<double, double> b) {
    const double eps = 1e-12 * std::max(1.0, b.first);
    if (a.first < b.first - eps) return true;
    return a.first <= b.first + eps && a.second < b.second * (1 - 1e-12);
  };
  for (int iter = 0; iter < 16 * n * ranks; ++iter) {
    int top = 0;
    {
      double max_load = -1;
      for (int r = 0; r < ranks; ++r) {
        double load = 0;
        for (int i : held[r]) load += share(i);
        if (load > max_load) max_load = load, top = r;
      }
    }
    std::pair<double, double> best = score(copies);
    // kind 0: move a to q; 1: swap a with q's b; 2: replace a (replicated) with b.
    int best_kind = -1, best_q = -1, best_a = -1, best_b = -1;
    const std::vector<int> top_items(held[top].begin(), held[top].end());
    for (int a : top_items) {
      for (int q = 0; q < ranks; ++q) {
        if (q == top || held[q].count(a)) continue;
        if (static_cast<int>(held[q].size()) < slots_per_rank) {
          move(a, top, q);
          if (const auto sc = score(copies); better(sc, best)) {
            best = sc, best_kind = 0, best_q = q, best_a = a;
          }
          move(a, q, top);
        }
        const std::vector<int> q_items(held[q].begin(), held[q].end());
        for (int b : q_items) {
          if (held[top].count(b)) continue;
          move(a, top, q);
          move(b, q, top);
          if (const auto sc = score(copies); better(sc, best)) {
            best = sc, best_kind = 1, best_q = q, best_a = a, best_b = b;
          }
          move(b, top, q);
          move(a, q, top);
        }
      }
      if (copies[a] < 2) continue;
      for (int b = 0; b < n; ++b) {
        if (held[top].count(b)) continue;
        held[top].erase(a);
        held[top].insert(b);
        --copies[a];
        ++copies[b];
        if (const auto sc = score(copies); better(sc, best)) {
          best = sc, best_kind = 2, best_a = a, best_b = b;
        }
        ++copies[a];
        --copies[b];
        held[top].erase(b);
        held[top].insert(a);
      }
    }
    if (best_kind < 0) break;
    if (best_kind == 0) {
      move(best_a, top, best_q);
    } else if (best_kind == 1) {
      move(best_a, top, best_q);
      move(best_b, best_q, top);
    } else {
      held[top].erase(best_a);
      held[top].insert(best_b);
      --copies[best_a];
      ++copies[best_b];
    }
  }
  for (int r = 0; r < ranks; ++r) {
    std::vector<int>& out = slots[part.ranks[r]];
    for (int i : held[r]) out.push_back(part.experts[i]);
    std::sort(out.begin(), out.end());
  }
}

// Greedy matching maximizing overlap: perm[new index] = old index.
std::vector<int> MatchByOverlap(const std::vector<std::vector<int>>& overlap) {
  const int n = static_cast<int>(overlap.size());
  std::vector<int> perm(n, -1);
  std::vector<bool> taken(n, false);
  for (int round = 0; round < n; ++round) {
    int bi = -1, bj = -1;
    for (int i = 0; i < n; ++i) {
      if (perm[i] >= 0) continue;
      for (int j = 0; j < n; ++j) {
        if (!taken[j] && (bi < 0 || overlap[i][j] > overlap[bi][bj])) bi = i, bj = j;
      }
    }
    perm[bi] = bj;
    taken[bj] = true;
  }
  return perm;
}

int Overlap(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return static_cast<int>(both.size());
}

// Relabels next's nodes, then the ranks within each node, to keep prev's experts in place.
LayerPlacement Relabel(const LayerPlacement& next, const LayerPlacement& prev, int nodes) {
  const int ranks = static_cast<int>(next.slots.size());
  const int per_node = ranks / nodes;
  const auto node_experts = [&](const LayerPlacement& p, int node) {
    std::vector<int> all;
    for (int r = node * per_node; r < (node + 1) * per_node; ++r)
      all.insert(all.end(), p.slots[r].begin(), p.slots[r].end());
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    return all;
  };
  std::vector<std::vector<int>> node_overlap(nodes, std::vector<int>(nodes));
  for (int i = 0; i < nodes; ++i) {
    for (int j = 0; j < nodes; ++j)
      node_overlap[i][j] = Overlap(node_experts(next, i), node_experts(prev, j));
  }
  const std::vector<int> node_perm = MatchByOverlap(node_overlap);
  LayerPlacement out;
  out.slots.resize(ranks);
  for (int i = 0; i < nodes; ++i) {
    const int j = node_perm[i];
    std::vector<std::vector<int>> overlap(per_node, std::vector<int>(per_node));
    for (int a = 0; a < per_node; ++a) {
      for (int b = 0; b < per_node; ++b)
        overlap[a][b] = Overlap(next.slots[i * per_node + a], prev.slots[j * per_node + b]);
    }
    const std::vector<int> perm = MatchByOverlap(overlap);
    for (int a = 0; a < per_node; ++a) out.slots[j * per_node + perm[a]] = next.slots[i * per_node + a];
  }
  return out;
}

double MaxLoad(const LayerPlacement& layer, const std::vector<double>& loads) {
  const std::vector<double> rank_loads = RankLoads(layer, loads);
  return *std::max_element(rank_loads.begin(), rank_loads.end());
}

}  // namespace

int SlotsPerRank(int num_experts, const PlanOptions& options) {
  return (num_experts + options.num_ranks - 1) / options.num_ranks + options.redundant_per_rank;
}

absl::StatusOr<Placement> Plan(const std::vector<std::vector<double>>& loads,
                               const PlanOptions& options, const Placement* previous) {
  if (loads.empty() || loads[0].empty()) {
    return absl::InvalidArgumentError("expert placement plan: no layers or no experts");
  }
  const int experts = static_cast<int>(loads[0].size());
  const int ranks = options.num_ranks;
  if (ranks <= 0 || options.num_nodes <= 0 || ranks % options.num_nodes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert placement plan: ", ranks,
                                                   " ranks do not split into ",
                                                   options.num_nodes, " nodes"));
  }
  if (options.redundant_per_rank < 0 || options.num_groups < 0 || options.keep_tolerance < 0) {
    return absl::InvalidArgumentError(
        "expert placement plan: negative redundant slots, groups or tolerance");
  }
  for (size_t l = 0; l < loads.size(); ++l) {
    if (static_cast<int>(loads[l].size()) != experts) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement plan: layer ", l, " has ",
                                                     loads[l].size(), " experts, not ", experts));
    }
    for (double load : loads[l]) {
      if (!(load >= 0) || std::isinf(load)) {
        return absl::InvalidArgumentError(
            absl::StrCat("expert placement plan: layer ", l, " has load ", load));
      }
    }
  }
  const int slots_per_rank = SlotsPerRank(experts, options);
  const int groups = options.num_groups == 0 ? experts : options.num_groups;
  int nodes = options.num_nodes;
  if (nodes > 1 && (experts % groups != 0 || groups % nodes != 0)) nodes = 1;
  const bool keep_ok = previous != nullptr && previous->num_experts == experts &&
                       previous->num_ranks == ranks && previous->layers.size() == loads.size();

  Placement placement{experts, ranks, {}};
  for (size_t l = 0; l < loads.size(); ++l) {
    const std::vector<double>& load = loads[l];
    std::vector<Part> parts(nodes);
    const int per_node = ranks / nodes;
    if (nodes == 1) {
      parts[0].experts.resize(experts);
      std::iota(parts[0].experts.begin(), parts[0].experts.end(), 0);
    } else {
      const int group_size = experts / groups;
      std::vector<double> group_load(groups, 0.0);
      for (int e = 0; e < experts; ++e) group_load[e / group_size] += load[e];
      const std::vector<int> node_of = PackEqual(group_load, nodes, groups / nodes);
      for (int e = 0; e < experts; ++e) parts[node_of[e / group_size]].experts.push_back(e);
    }
    for (int n = 0; n < nodes; ++n) {
      for (int r = n * per_node; r < (n + 1) * per_node; ++r) parts[n].ranks.push_back(r);
    }
    LayerPlacement layer;
    layer.slots.resize(ranks);
    for (const Part& part : parts) PlanPart(part, load, slots_per_rank, layer.slots);

    if (keep_ok) {
      const LayerPlacement& prev = previous->layers[l];
      bool same_shape = prev.slots.size() == layer.slots.size();
      for (size_t r = 0; same_shape && r < prev.slots.size(); ++r) {
        same_shape = prev.slots[r].size() == layer.slots[r].size();
      }
      if (same_shape) {
        if (MaxLoad(prev, load) <= MaxLoad(layer, load) * (1 + options.keep_tolerance)) {
          layer = prev;
        } else {
          layer = Relabel(layer, prev, nodes);
        }
      }
    }
    placement.layers.push_back(std::move(layer));
  }
  return placement;
}

}  // namespace lockstep::eplb

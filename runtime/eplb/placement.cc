#include "runtime/eplb/placement.h"

#include <algorithm>
#include <cstdint>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lockstep::eplb {

Placement ContiguousPlacement(int num_experts, int num_ranks, int num_layers) {
  LayerPlacement layer;
  layer.slots.resize(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    const int first = static_cast<int>(static_cast<int64_t>(r) * num_experts / num_ranks);
    const int end = static_cast<int>(static_cast<int64_t>(r + 1) * num_experts / num_ranks);
    for (int e = first; e < end; ++e) layer.slots[r].push_back(e);
  }
  return Placement{num_experts, num_ranks, std::vector<LayerPlacement>(num_layers, layer)};
}

absl::Status Validate(const Placement& placement) {
  if (placement.num_experts <= 0 || placement.num_ranks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert placement: ", placement.num_experts,
                                                   " experts on ", placement.num_ranks,
                                                   " ranks"));
  }
  for (size_t l = 0; l < placement.layers.size(); ++l) {
    const LayerPlacement& layer = placement.layers[l];
    if (static_cast<int>(layer.slots.size()) != placement.num_ranks) {
      return absl::InvalidArgumentError(absl::StrCat("expert placement: layer ", l, " has ",
                                                     layer.slots.size(), " ranks, not ",
                                                     placement.num_ranks));
    }
    std::vector<bool> held(placement.num_experts, false);
    for (int r = 0; r < placement.num_ranks; ++r) {
      const std::vector<int>& slots = layer.slots[r];
      for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i] < 0 || slots[i] >= placement.num_experts) {
          return absl::InvalidArgumentError(absl::StrCat("expert placement: layer ", l, " rank ",
                                                         r, " names expert ", slots[i], " of ",
                                                         placement.num_experts));
        }
        if (i > 0 && slots[i] <= slots[i - 1]) {
          return absl::InvalidArgumentError(
              absl::StrCat("expert placement: layer ", l, " rank ", r,
                           " lists its experts out of ascending order or twice (", slots[i], ")"));
        }
        held[slots[i]] = true;
      }
    }
    for (int e = 0; e < placement.num_experts; ++e) {
      if (!held[e]) {
        return absl::InvalidArgumentError(
            absl::StrCat("expert placement: layer ", l, " places no replica of expert ", e));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<int>> ReplicaRanks(const LayerPlacement& layer, int num_experts) {
  std::vector<std::vector<int>> replicas(num_experts);
  for (size_t r = 0; r < layer.slots.size(); ++r) {
    for (int e : layer.slots[r]) replicas[e].push_back(static_cast<int>(r));
  }
  return replicas;
}

std::vector<double> RankLoads(const LayerPlacement& layer, const std::vector<double>& loads) {
  std::vector<int> copies(loads.size(), 0);
  for (const auto& slots : layer.slots) {
    for (int e : slots) ++copies[e];
  }
  std::vector<double> rank_loads(layer.slots.size(), 0.0);
  for (size_t r = 0; r < layer.slots.size(); ++r) {
    for (int e : layer.slots[r]) rank_loads[r] += loads[e] / copies[e];
  }
  return rank_loads;
}

double Imbalance(const LayerPlacement& layer, const std::vector<double>& loads) {
  const std::vector<double> rank_loads = RankLoads(layer, loads);
  double total = 0, max = 0;
  for (double load : rank_loads) {
    total += load;
    max = std::max(max, load);
  }
  if (total <= 0 || rank_loads.empty()) return 1.0;
  return max / (total / rank_loads.size());
}

int SlotsToLoad(const LayerPlacement& prev, const LayerPlacement& next) {
  int count = 0;
  for (size_t r = 0; r < next.slots.size(); ++r) {
    const std::set<int> had = r < prev.slots.size()
                                  ? std::set<int>(prev.slots[r].begin(), prev.slots[r].end())
                                  : std::set<int>();
    for (int e : next.slots[r]) count += had.count(e) == 0 ? 1 : 0;
  }
  return count;
}

std::string Format(const Placement& placement) {
  std::string text;
  for (size_t l = 0; l < placement.layers.size(); ++l) {
    for (size_t r = 0; r < placement.layers[l].slots.size(); ++r) {
      absl::StrAppend(&text, l, " ", r, ": ", absl::StrJoin(placement.layers[l].slots[r], " "),
                      "\n");
    }
  }
  return text;
}

absl::StatusOr<Placement> Parse(const std::string& text, int num_experts, int num_ranks,
                                int num_layers) {
  Placement placement{num_experts, num_ranks, {}};
  placement.layers.resize(num_layers);
  std::vector<std::vector<bool>> seen(num_layers, std::vector<bool>(num_ranks, false));
  for (auto& layer : placement.layers) layer.slots.resize(num_ranks);
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert placement line ", line_no, " (\"", line, "\"): ", why));
    };
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return bad("expected '<layer> <rank>: experts...'");
    std::vector<absl::string_view> head =
        absl::StrSplit(line.substr(0, colon), ' ', absl::SkipWhitespace());
    int layer = -1, rank = -1;
    if (head.size() != 2 || !absl::SimpleAtoi(head[0], &layer) ||
        !absl::SimpleAtoi(head[1], &rank)) {
      return bad("expected '<layer> <rank>:' before the colon");
    }
    if (layer < 0 || layer >= num_layers) {
      return bad(absl::StrCat("layer out of range [0, ", num_layers, ")"));
    }
    if (rank < 0 || rank >= num_ranks) {
      return bad(absl::StrCat("rank out of range [0, ", num_ranks, ")"));
    }
    if (seen[layer][rank]) return bad("layer and rank given twice");
    seen[layer][rank] = true;
    for (absl::string_view word :
         absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipWhitespace())) {
      int expert = -1;
      if (!absl::SimpleAtoi(word, &expert)) return bad(absl::StrCat("not an expert id: ", word));
      placement.layers[layer].slots[rank].push_back(expert);
    }
  }
  const Placement contiguous = ContiguousPlacement(num_experts, num_ranks, num_layers);
  for (int l = 0; l < num_layers; ++l) {
    if (std::none_of(seen[l].begin(), seen[l].end(), [](bool b) { return b; })) {
      placement.layers[l] = contiguous.layers[l];  // not named: the contiguous sharding
      continue;
    }
    for (int r = 0; r < num_ranks; ++r) {
      if (!seen[l][r]) {
        return absl::InvalidArgumentError(
            absl::StrCat("expert placement: no line for layer ", l, " rank ", r));
      }
    }
  }
  if (absl::Status s = Validate(placement); !s.ok()) return s;
  return placement;
}

absl::StatusOr<std::vector<std::vector<double>>> ParseLoads(const std::string& text) {
  std::vector<std::vector<double>> loads;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "routed ")) continue;
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("expert load line ", line_no, ": ", why));
    };
    const size_t colon = line.find(':');
    int layer = -1;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(0, colon)), &layer)) {
      return bad("expected 'routed <layer>: counts...'");
    }
    if (layer != static_cast<int>(loads.size())) {
      return bad(absl::StrCat("layer ", layer, " where layer ", loads.size(), " was expected"));
    }
    std::vector<double> counts;
    for (absl::string_view word :
         absl::StrSplit(line.substr(colon + 1), ' ', absl::SkipWhitespace())) {
      double count = 0;
      if (!absl::SimpleAtod(word, &count) || !(count >= 0)) {
        return bad(absl::StrCat("not a load: ", word));
      }
      counts.push_back(count);
    }
    if (!loads.empty() && counts.size() != loads[0].size()) {
      return bad(absl::StrCat(counts.size(), " experts where layer 0 has ", loads[0].size()));
    }
    loads.push_back(std::move(counts));
  }
  if (loads.empty()) return absl::InvalidArgumentError("expert loads: no 'routed' line");
  return loads;
}

}  // namespace lockstep::eplb

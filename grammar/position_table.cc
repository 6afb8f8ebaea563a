#include "grammar/position_table.h"

#include <string>
#include <utility>

namespace lockstep::grammar {

PositionTable BuildPositionTable(const Parser& parser, const TokenTrie& trie, int32_t vocab_size,
                                 int32_t rule, int32_t alt, int32_t pos, const ByteSet& follow) {
  PositionTable table;
  table.accepted.assign((vocab_size + 31) / 32, 0);
  std::vector<std::pair<std::string, int32_t>> dependent;
  FrameStore store;
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  std::vector<ParseState> states(1, parser.StartAt(&store, rule, alt, pos));
  std::vector<int32_t> exits;  // depths (along the current path) where a parse left the rule
  std::string path;            // the current node's bytes
  auto add_dependent = [&](int32_t token) {
    for (int32_t k : exits) {
      // Left the rule before a byte nothing after the rule begins with: dies anywhere.
      if (k < static_cast<int32_t>(path.size()) && !follow.Contains(static_cast<uint8_t>(path[k]))) {
        continue;
      }
      dependent.push_back({path.substr(k), token});
    }
  };
  const int32_t n = static_cast<int32_t>(nodes.size());
  for (int32_t i = 1; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    const int32_t d = node.depth;
    while (!exits.empty() && exits.back() >= d) exits.pop_back();
    path.resize(d - 1);
    path.push_back(static_cast<char>(node.byte));
    if (static_cast<int32_t>(states.size()) <= d) states.resize(d + 1);
    parser.Advance(&store, states[d - 1], node.byte, &states[d]);
    const ParseState& s = states[d];
    if (s.can_end) exits.push_back(d);
    if (s.tops.empty()) {
      // Nothing continues inside the rule: every token below depends on the exits.
      if (!exits.empty()) {
        for (int32_t j = i; j < node.subtree_end; ++j) {
          const TokenTrie::Node& below = nodes[j];
          if (j > i) {
            path.resize(below.depth - 1);
            path.push_back(static_cast<char>(below.byte));
          }
          for (int32_t k = below.tokens_begin; k < below.tokens_end; ++k) add_dependent(ids[k]);
        }
      }
      i = node.subtree_end;
      continue;
    }
    for (int32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
      table.accepted[ids[k] >> 5] |= uint32_t{1} << (ids[k] & 31);
      ++table.num_accepted;
    }
    ++i;
  }
  std::vector<std::pair<uint32_t, uint32_t>> words;
  for (size_t w = 0; w < table.accepted.size() && words.size() * 8 <= table.accepted.size(); ++w) {
    if (table.accepted[w] != 0) words.push_back({static_cast<uint32_t>(w), table.accepted[w]});
  }
  if (words.size() * 8 <= table.accepted.size()) {
    table.sparse = true;
    table.accepted_words = std::move(words);
  }
  table.dependent = TokenTrie(std::move(dependent));
  return table;
}

}  // namespace lockstep::grammar

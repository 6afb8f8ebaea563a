#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace lockstep::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes,
                     const std::vector<bool>& excluded) {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < static_cast<int32_t>(token_bytes.size()); ++id) {
    if (!token_bytes[id].empty() && !(id < static_cast<int32_t>(excluded.size()) && excluded[id])) {
      order.push_back(id);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  nodes_.push_back(Node{});
  std::vector<int32_t> path = {0};  // node index per depth
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& bytes = token_bytes[id];
    size_t common = 0;
    if (previous != nullptr) {
      while (common < bytes.size() && common < previous->size() &&
             bytes[common] == (*previous)[common]) {
        ++common;
      }
    }
    path.resize(common + 1);
    for (size_t d = common; d < bytes.size(); ++d) {
      Node node;
      node.byte = static_cast<uint8_t>(bytes[d]);
      node.depth = static_cast<int32_t>(d + 1);
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back(node);
    }
    Node& last = nodes_[path.back()];
    if (last.tokens_begin == last.tokens_end) {
      last.tokens_begin = static_cast<int32_t>(token_ids_.size());
      last.tokens_end = last.tokens_begin;
    }
    token_ids_.push_back(id);
    ++last.tokens_end;
    previous = &bytes;
  }
  // Subtree ends: a node's subtree runs to the next node at the same or smaller depth.
  std::vector<int32_t> open;
  const int32_t n = static_cast<int32_t>(nodes_.size());
  for (int32_t i = 0; i < n; ++i) {
    while (!open.empty() && nodes_[open.back()].depth >= nodes_[i].depth) {
      nodes_[open.back()].subtree_end = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (int32_t i : open) nodes_[i].subtree_end = n;
}

}  // namespace lockstep::grammar

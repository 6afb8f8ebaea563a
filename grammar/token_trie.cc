#include "grammar/token_trie.h"

#include <algorithm>

namespace lockstep::grammar {
namespace {

bool Less(const std::pair<const std::string*, int32_t>& a,
          const std::pair<const std::string*, int32_t>& b) {
  return *a.first < *b.first || (*a.first == *b.first && a.second < b.second);
}

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes,
                     const std::vector<bool>& excluded) {
  std::vector<std::pair<const std::string*, int32_t>> sorted;
  for (int32_t id = 0; id < static_cast<int32_t>(token_bytes.size()); ++id) {
    const bool skip = id < static_cast<int32_t>(excluded.size()) && excluded[id];
    if (!token_bytes[id].empty() && !skip) sorted.push_back({&token_bytes[id], id});
  }
  std::sort(sorted.begin(), sorted.end(), Less);
  Build(sorted);
}

TokenTrie::TokenTrie(std::vector<std::pair<std::string, int32_t>> entries) {
  std::vector<std::pair<const std::string*, int32_t>> sorted;
  sorted.reserve(entries.size());
  for (const auto& [bytes, id] : entries) sorted.push_back({&bytes, id});
  std::sort(sorted.begin(), sorted.end(), Less);
  sorted.erase(std::unique(sorted.begin(), sorted.end(),
                           [](const auto& a, const auto& b) {
                             return *a.first == *b.first && a.second == b.second;
                           }),
               sorted.end());
  Build(sorted);
}

void TokenTrie::Build(const std::vector<std::pair<const std::string*, int32_t>>& sorted) {
  nodes_.push_back(Node{});
  std::vector<int32_t> path = {0};  // node index per depth
  const std::string* previous = nullptr;
  for (const auto& [bytes_ptr, id] : sorted) {
    const std::string& bytes = *bytes_ptr;
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
    // Equal strings are adjacent in sorted order, so a node's ids are contiguous.
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

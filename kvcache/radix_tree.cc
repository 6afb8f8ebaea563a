#include "kvcache/radix_tree.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace lockstep::kv {

RadixTree::RadixTree(int32_t num_blocks, int tokens_per_block, uint64_t salt, BlockHasher hasher)
    : tokens_per_block_(tokens_per_block),
      root_key_(RootHash(salt)),
      hasher_(hasher),
      nodes_(static_cast<size_t>(num_blocks)),
      tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(tokens_per_block)) {
  // At most one node per block: the map never grows past this, so Insert never
  // reallocates it.
  by_key_.reserve(static_cast<size_t>(num_blocks));
}

int64_t RadixTree::Match(absl::Span<const int32_t> tokens, int64_t max_blocks,
                         absl::FunctionRef<void(BlockId)> visit) const {
  return Match(tokens, {}, max_blocks, visit);
}

int64_t RadixTree::Match(absl::Span<const int32_t> tokens, absl::Span<const uint64_t> keys,
                         int64_t max_blocks, absl::FunctionRef<void(BlockId)> visit) const {
  const int64_t full = static_cast<int64_t>(tokens.size()) / tokens_per_block_;
  const int64_t limit = std::min(full, max_blocks);
  int32_t parent = kRoot.value();
  uint64_t parent_key = root_key_;
  int64_t matched = 0;
  for (; matched < limit; ++matched) {
    const absl::Span<const int32_t> block_tokens =
        tokens.subspan(static_cast<size_t>(matched) * tokens_per_block_, tokens_per_block_);
    const uint64_t key = matched < static_cast<int64_t>(keys.size())
                             ? keys[static_cast<size_t>(matched)]
                             : hasher_(parent_key, block_tokens);
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) break;
    const int32_t node = it->second;
    if (nodes_[node].parent != parent ||
        !std::equal(block_tokens.begin(), block_tokens.end(), TokensOf(node).begin())) {
      break;  // a key collision: never reuse KV computed for other tokens
    }
    visit(BlockId(node));
    parent = node;
    parent_key = key;
  }
  return matched;
}

bool RadixTree::Insert(BlockId parent, BlockId block, absl::Span<const int32_t> tokens) {
  return InsertKeyed(parent, block, tokens, hasher_(KeyOf(parent), tokens));
}

bool RadixTree::Insert(BlockId parent, BlockId block, absl::Span<const int32_t> tokens,
                       uint64_t key) {
  LOCKSTEP_DCHECK(key == hasher_(KeyOf(parent), tokens));
  return InsertKeyed(parent, block, tokens, key);
}

bool RadixTree::InsertKeyed(BlockId parent, BlockId block, absl::Span<const int32_t> tokens,
                            uint64_t key) {
  LOCKSTEP_CHECK(static_cast<int>(tokens.size()) == tokens_per_block_)
      << "a published block holds " << tokens_per_block_ << " tokens, got " << tokens.size();
  Node& node = nodes_[block.value()];
  LOCKSTEP_CHECK(!node.in_tree) << "block " << block << " published twice";
  if (parent != kRoot) {
    const Node& p = nodes_[parent.value()];
    LOCKSTEP_CHECK(p.in_tree && !p.evictable) << "block " << block << " published under block "
                                              << parent << " that is not a referenced node";
  }
  if (!by_key_.try_emplace(key, block.value()).second) return false;
  node = Node{.key = key, .parent = parent.value(), .in_tree = true};
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<ptrdiff_t>(block.value()) * tokens_per_block_);
  if (parent != kRoot) ++nodes_[parent.value()].num_children;
  ++num_nodes_;
  if (observer_ != nullptr) observer_->OnCommitted(key);
  return true;
}

void RadixTree::MarkEvictable(BlockId block) {
  Node& node = nodes_[block.value()];
  LOCKSTEP_CHECK(node.in_tree && !node.evictable) << "block " << block;
  node.evictable = true;
  node.lru_prev = lru_tail_;
  node.lru_next = -1;
  if (lru_tail_ != -1) {
    nodes_[lru_tail_].lru_next = block.value();
  } else {
    lru_head_ = block.value();
  }
  lru_tail_ = block.value();
  ++num_evictable_;
}

void RadixTree::MarkInUse(BlockId block) {
  LOCKSTEP_CHECK(nodes_[block.value()].evictable) << "block " << block;
  Unlink(block.value());
}

void RadixTree::Unlink(int32_t block) {
  Node& node = nodes_[block];
  if (node.lru_prev != -1) {
    nodes_[node.lru_prev].lru_next = node.lru_next;
  } else {
    lru_head_ = node.lru_next;
  }
  if (node.lru_next != -1) {
    nodes_[node.lru_next].lru_prev = node.lru_prev;
  } else {
    lru_tail_ = node.lru_prev;
  }
  node.lru_prev = node.lru_next = -1;
  node.evictable = false;
  --num_evictable_;
}

std::optional<BlockId> RadixTree::EvictLru() {
  if (lru_head_ == -1) return std::nullopt;
  const int32_t block = lru_head_;
  Node& node = nodes_[block];
  LOCKSTEP_CHECK(node.num_children == 0)
      << "LRU front block " << block << " has " << node.num_children << " children";
  Unlink(block);
  by_key_.erase(node.key);
  if (node.parent != kRoot.value()) --nodes_[node.parent].num_children;
  if (observer_ != nullptr) observer_->OnEvicted(node.key);
  node = Node{};
  --num_nodes_;
  return BlockId(block);
}

std::vector<BlockId> RadixTree::LruOrder() const {
  std::vector<BlockId> order;
  for (int32_t b = lru_head_; b != -1 && order.size() < nodes_.size(); b = nodes_[b].lru_next) {
    order.push_back(BlockId(b));
  }
  return order;
}

void RadixTree::AuditInto(const std::string& prefix, std::vector<std::string>* out) const {
  const int32_t n = static_cast<int32_t>(nodes_.size());
  std::vector<int32_t> children(nodes_.size(), 0);
  int32_t in_tree = 0;
  for (int32_t b = 0; b < n; ++b) {
    const Node& node = nodes_[b];
    if (!node.in_tree) {
      if (node.evictable)
        out->push_back(absl::StrCat(prefix, "block ", b, " is evictable but not a node"));
      continue;
    }
    ++in_tree;
    const auto it = by_key_.find(node.key);
    if (it == by_key_.end() || it->second != b) {
      out->push_back(absl::StrCat(prefix, "node ", b, " is not indexed by its key"));
    }
    if (node.parent != kRoot.value()) {
      if (node.parent < 0 || node.parent >= n || !nodes_[node.parent].in_tree) {
        out->push_back(
            absl::StrCat(prefix, "node ", b, " has parent ", node.parent, " which is not a node"));
      } else {
        ++children[node.parent];
        if (node.key != hasher_(nodes_[node.parent].key, TokensOf(b))) {
          out->push_back(absl::StrCat(prefix, "node ", b, " key does not match its tokens"));
        }
      }
    } else if (node.key != hasher_(root_key_, TokensOf(b))) {
      out->push_back(absl::StrCat(prefix, "node ", b, " key does not match its tokens"));
    }
  }
  for (int32_t b = 0; b < n; ++b) {
    if (nodes_[b].in_tree && nodes_[b].num_children != children[b]) {
      out->push_back(absl::StrCat(prefix, "node ", b, " counts ", nodes_[b].num_children,
                                  " children, has ", children[b]));
    }
  }
  if (in_tree != num_nodes_ || static_cast<int32_t>(by_key_.size()) != num_nodes_) {
    out->push_back(absl::StrCat(prefix, "radix tree counts ", num_nodes_, " nodes, has ", in_tree,
                                " nodes and ", by_key_.size(), " keys"));
  }
  // LRU: every evictable node once, children before their parent.
  std::vector<int32_t> position(nodes_.size(), -1);
  int32_t count = 0;
  int32_t prev = -1;
  for (int32_t b = lru_head_; b != -1; prev = b, b = nodes_[b].lru_next) {
    if (b < 0 || b >= n || position[b] != -1 || !nodes_[b].evictable) {
      out->push_back(absl::StrCat(prefix, "LRU list is broken at block ", b));
      break;
    }
    if (nodes_[b].lru_prev != prev) {
      out->push_back(absl::StrCat(prefix, "LRU back link of block ", b, " is wrong"));
    }
    position[b] = count++;
  }
  if (prev != lru_tail_ && count == num_evictable_) {
    out->push_back(absl::StrCat(prefix, "LRU tail is ", lru_tail_, ", list ends at ", prev));
  }
  for (int32_t b = 0; b < n; ++b) {
    if (nodes_[b].evictable && position[b] == -1) {
      out->push_back(absl::StrCat(prefix, "evictable node ", b, " is not in the LRU list"));
    }
    const int32_t parent = nodes_[b].parent;
    if (!nodes_[b].in_tree || parent == kRoot.value() || parent < 0 || parent >= n) continue;
    if (!nodes_[b].evictable && nodes_[parent].evictable) {
      out->push_back(absl::StrCat(prefix, "referenced node ", b, " has evictable parent ", parent));
    }
    if (position[b] != -1 && position[parent] != -1 && position[parent] < position[b]) {
      out->push_back(
          absl::StrCat(prefix, "evictable node ", b, " is behind its parent in the LRU list"));
    }
  }
  if (count != num_evictable_) {
    out->push_back(
        absl::StrCat(prefix, "LRU list holds ", count, " nodes but counts ", num_evictable_));
  }
}

}  // namespace lockstep::kv

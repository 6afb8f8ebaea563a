#include "grammar/mask_cache.h"

#include <algorithm>
#include <cstring>

namespace lockstep::grammar {

std::string MaskCache::Key(const FrameStore& store, const ParseState& state) {
  std::vector<std::vector<int32_t>> stacks;
  stacks.reserve(state.tops.size());
  for (int32_t top : state.tops) {
    std::vector<int32_t>& stack = stacks.emplace_back();
    for (int32_t id = top; id != 0;) {
      const Frame& f = store.Get(id);
      stack.insert(stack.end(), {f.rule, f.alt, f.pos});
      id = f.parent;
    }
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key(1, state.can_end ? '1' : '0');
  for (const std::vector<int32_t>& stack : stacks) {
    const int32_t n = static_cast<int32_t>(stack.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof(n));
    key.append(reinterpret_cast<const char*>(stack.data()), stack.size() * sizeof(int32_t));
  }
  return key;
}

bool MaskCache::Lookup(const std::string& key, absl::Span<uint32_t> mask) {
  std::shared_ptr<const Packed> packed;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    packed = it->second.packed;
  }
  if (packed->raw.size() == mask.size()) {
    std::copy(packed->raw.begin(), packed->raw.end(), mask.begin());
    return true;
  }
  std::fill(mask.begin(), mask.end(), packed->fill);
  for (const auto& [index, value] : packed->words) mask[index] = value;
  return true;
}

void MaskCache::Insert(const std::string& key, absl::Span<const uint32_t> mask) {
  auto packed = std::make_shared<Packed>();
  size_t ones = 0, zeros = 0;
  for (uint32_t w : mask) {
    ones += w == ~0u;
    zeros += w == 0u;
  }
  packed->fill = ones > zeros ? ~0u : 0u;
  const size_t differ = mask.size() - std::max(ones, zeros);
  if (differ * 2 > mask.size()) {
    packed->raw.assign(mask.begin(), mask.end());
  } else {
    packed->words.reserve(differ);
    for (size_t i = 0; i < mask.size(); ++i) {
      if (mask[i] != packed->fill) packed->words.push_back({static_cast<uint32_t>(i), mask[i]});
    }
  }
  const size_t size = packed->Bytes() + key.size();
  if (size > capacity_bytes_) return;
  absl::MutexLock lock(&mu_);
  if (entries_.contains(key)) return;  // another thread inserted it first
  lru_.push_front(key);
  entries_.emplace(key, Entry{std::move(packed), lru_.begin()});
  bytes_ += size;
  while (bytes_ > capacity_bytes_) {
    auto it = entries_.find(lru_.back());
    bytes_ -= it->second.packed->Bytes() + it->first.size();
    entries_.erase(it);
    lru_.pop_back();
  }
}

size_t MaskCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

size_t MaskCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace lockstep::grammar

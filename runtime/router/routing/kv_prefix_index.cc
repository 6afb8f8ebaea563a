#include "runtime/router/routing/kv_prefix_index.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace lockstep::router {

KvPrefixIndex::KvPrefixIndex(Options options) : options_(options) {}

KvPrefixIndex::SourceId KvPrefixIndex::SourceOf(const std::string& instance, int32_t rank) {
  const auto [it, added] = source_ids_.try_emplace(std::make_pair(instance, rank),
                                                   static_cast<SourceId>(sources_.size()));
  if (added) sources_.push_back(Source{.instance = instance, .rank = rank});
  return it->second;
}

const KvPrefixIndex::Source* KvPrefixIndex::FindSource(const std::string& instance,
                                                       int32_t rank) const {
  const auto it = source_ids_.find(std::make_pair(instance, rank));
  return it == source_ids_.end() ? nullptr : &sources_[it->second];
}

void KvPrefixIndex::Touch(Entry& entry) { lru_.splice(lru_.end(), lru_, entry.lru); }

namespace {

uint8_t Bit(KvTier tier) { return static_cast<uint8_t>(1u << static_cast<unsigned>(tier)); }

// The best tier in a holder's mask (the device first).
KvTier BestTier(uint8_t mask) {
  if (mask & Bit(KvTier::kDevice)) return KvTier::kDevice;
  if (mask & Bit(KvTier::kHost)) return KvTier::kHost;
  return KvTier::kDisk;
}

}  // namespace

void KvPrefixIndex::Add(SourceId source, uint64_t key, KvTier tier) {
  auto [it, added] = entries_.try_emplace(key);
  Entry& entry = it->second;
  if (added) {
    entry.lru = lru_.insert(lru_.end(), key);
  } else {
    Touch(entry);
  }
  if (std::find(entry.holders.begin(), entry.holders.end(), source) == entry.holders.end()) {
    entry.holders.push_back(source);
  }
  sources_[source].keys[key] |= Bit(tier);
}

void KvPrefixIndex::Remove(SourceId source, uint64_t key, KvTier tier) {
  auto& keys = sources_[source].keys;
  const auto held = keys.find(key);
  if (held == keys.end()) return;
  held->second &= static_cast<uint8_t>(~Bit(tier));
  if (held->second != 0) return;  // still in another tier
  keys.erase(held);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return;
  std::vector<SourceId>& holders = it->second.holders;
  holders.erase(std::remove(holders.begin(), holders.end(), source), holders.end());
  if (holders.empty()) {
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
}

void KvPrefixIndex::AddAll(SourceId source, absl::Span<const uint64_t> keys, KvTier tier) {
  for (uint64_t key : keys) Add(source, key, tier);
}

void KvPrefixIndex::RemoveAll(SourceId source, absl::Span<const uint64_t> keys, KvTier tier) {
  for (uint64_t key : keys) Remove(source, key, tier);
}

void KvPrefixIndex::Clear(SourceId source) {
  std::vector<uint64_t> keys;
  keys.reserve(sources_[source].keys.size());
  for (const auto& [key, mask] : sources_[source].keys) keys.push_back(key);
  for (uint64_t key : keys) {
    for (KvTier tier : {KvTier::kDevice, KvTier::kHost, KvTier::kDisk}) Remove(source, key, tier);
  }
}

void KvPrefixIndex::EvictOverflow() {
  while (entries_.size() > options_.max_keys) {
    const uint64_t key = lru_.front();
    const auto it = entries_.find(key);
    for (SourceId holder : it->second.holders) sources_[holder].keys.erase(key);
    entries_.erase(it);
    lru_.pop_front();
  }
}

bool KvPrefixIndex::Apply(const KvEventBatch& batch) {
  absl::MutexLock lock(&mu_);
  const SourceId id = SourceOf(batch.instance, batch.rank);
  if (batch.incarnation < sources_[id].incarnation) return true;  // from before a restart
  if (sources_[id].incarnation != batch.incarnation) {
    // A restart: every rank of the instance starts over with an empty cache.
    for (SourceId s = 0; s < static_cast<SourceId>(sources_.size()); ++s) {
      Source& other = sources_[s];
      if (other.instance != batch.instance || other.incarnation == batch.incarnation) continue;
      Clear(s);
      other.incarnation = batch.incarnation;
      other.seq = 0;
      other.in_sync = true;
    }
  }
  Source& source = sources_[id];
  if (!source.in_sync) return false;
  if (batch.seq <= source.seq) return true;  // a duplicate
  if (batch.seq != source.seq + 1) {
    Clear(id);
    source.in_sync = false;
    ++resyncs_;
    return false;
  }
  source.seq = batch.seq;
  RemoveAll(id, batch.evicted, KvTier::kDevice);
  AddAll(id, batch.committed, KvTier::kDevice);
  RemoveAll(id, batch.host_removed, KvTier::kHost);
  AddAll(id, batch.host_stored, KvTier::kHost);
  RemoveAll(id, batch.disk_removed, KvTier::kDisk);
  AddAll(id, batch.disk_stored, KvTier::kDisk);
  EvictOverflow();
  return true;
}

void KvPrefixIndex::ApplySnapshot(const KvSnapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  const SourceId id = SourceOf(snapshot.instance, snapshot.rank);
  Source& source = sources_[id];
  if (snapshot.incarnation < source.incarnation ||
      (source.in_sync && source.incarnation == snapshot.incarnation &&
       snapshot.seq <= source.seq)) {
    return;  // older than what the index already has
  }
  for (SourceId s = 0; s < static_cast<SourceId>(sources_.size()); ++s) {
    Source& other = sources_[s];
    if (s == id || other.instance != snapshot.instance ||
        other.incarnation == snapshot.incarnation) {
      continue;
    }
    Clear(s);  // another rank of an older incarnation: it restarted empty
    other.incarnation = snapshot.incarnation;
    other.seq = 0;
    other.in_sync = true;
  }
  Clear(id);
  source.incarnation = snapshot.incarnation;
  source.seq = snapshot.seq;
  source.in_sync = true;
  AddAll(id, snapshot.keys, KvTier::kDevice);
  AddAll(id, snapshot.host_keys, KvTier::kHost);
  AddAll(id, snapshot.disk_keys, KvTier::kDisk);
  EvictOverflow();
}

void KvPrefixIndex::RemoveInstance(const std::string& instance) {
  absl::MutexLock lock(&mu_);
  for (SourceId s = 0; s < static_cast<SourceId>(sources_.size()); ++s) {
    Source& source = sources_[s];
    if (source.instance != instance) continue;
    Clear(s);
    source.incarnation = 0;
    source.seq = 0;
    source.in_sync = false;
  }
}

std::vector<KvPrefixMatch> KvPrefixIndex::Match(absl::Span<const uint64_t> chain) {
  std::vector<KvPrefixMatch> out;
  absl::MutexLock lock(&mu_);
  if (chain.empty()) return out;
  const auto first = entries_.find(chain[0]);
  if (first == entries_.end()) return out;
  Touch(first->second);
  const std::vector<SourceId> holders = first->second.holders;
  std::vector<int64_t> blocks(holders.size(), 1);
  // Blocks per holder in each tier (index: KvTier), each in the best tier holding it.
  std::vector<std::array<int64_t, 3>> by_tier(holders.size(), {0, 0, 0});
  for (size_t h = 0; h < holders.size(); ++h) {
    ++by_tier[h][static_cast<size_t>(BestTier(sources_[holders[h]].keys.at(chain[0])))];
  }
  std::vector<bool> alive(holders.size(), true);
  size_t num_alive = holders.size();
  for (size_t i = 1; i < chain.size() && num_alive > 0; ++i) {
    const auto it = entries_.find(chain[i]);
    if (it == entries_.end()) break;
    Touch(it->second);
    for (size_t h = 0; h < holders.size(); ++h) {
      if (!alive[h]) continue;
      const auto& keys = sources_[holders[h]].keys;
      if (const auto held = keys.find(chain[i]); held != keys.end()) {
        ++blocks[h];
        ++by_tier[h][static_cast<size_t>(BestTier(held->second))];
      } else {
        alive[h] = false;
        --num_alive;
      }
    }
  }
  out.reserve(holders.size());
  for (size_t h = 0; h < holders.size(); ++h) {
    const Source& source = sources_[holders[h]];
    out.push_back({source.instance, source.rank, blocks[h],
                   by_tier[h][static_cast<size_t>(KvTier::kHost)],
                   by_tier[h][static_cast<size_t>(KvTier::kDisk)]});
  }
  std::sort(out.begin(), out.end(), [](const KvPrefixMatch& a, const KvPrefixMatch& b) {
    return std::tie(a.instance, a.rank) < std::tie(b.instance, b.rank);
  });
  return out;
}

bool KvPrefixIndex::NeedsSnapshot(const std::string& instance, int32_t rank) const {
  absl::MutexLock lock(&mu_);
  const Source* source = FindSource(instance, rank);
  return source != nullptr && !source->in_sync;
}

std::vector<uint64_t> KvPrefixIndex::KeysOf(const std::string& instance, int32_t rank,
                                            KvTier tier) const {
  absl::MutexLock lock(&mu_);
  const Source* source = FindSource(instance, rank);
  if (source == nullptr) return {};
  std::vector<uint64_t> keys;
  for (const auto& [key, mask] : source->keys) {
    if (mask & Bit(tier)) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<KvSourceStats> KvPrefixIndex::Sources() const {
  std::vector<KvSourceStats> out;
  absl::MutexLock lock(&mu_);
  for (const Source& source : sources_) {
    if (source.keys.empty() && (source.in_sync || source.incarnation == 0)) continue;
    out.push_back(
        {source.instance, source.rank, static_cast<int64_t>(source.keys.size()), source.in_sync});
  }
  std::sort(out.begin(), out.end(), [](const KvSourceStats& a, const KvSourceStats& b) {
    return std::tie(a.instance, a.rank) < std::tie(b.instance, b.rank);
  });
  return out;
}

size_t KvPrefixIndex::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

int64_t KvPrefixIndex::resyncs() const {
  absl::MutexLock lock(&mu_);
  return resyncs_;
}

}  // namespace lockstep::router

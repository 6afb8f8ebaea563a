#include "runtime/router/routing/kv_routing.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"
#include "kvcache/prefix_hash.h"

namespace lockstep::router {

KvRouting::KvRouting(Options options) : index_({.max_keys = options.max_keys}) {}

absl::StatusOr<v1::ReportKvEventsResponse> KvRouting::Apply(
    const v1::ReportKvEventsRequest& report) {
  const std::string& instance = report.instance();
  if (instance.empty() || report.incarnation() == 0 || report.tokens_per_block() < 1) {
    return absl::InvalidArgumentError(
        fmt::format("ReportKvEvents from '{}': needs an instance name, an incarnation > 0 and "
                    "tokens_per_block >= 1 (got incarnation {}, tokens_per_block {})",
                    instance, report.incarnation(), report.tokens_per_block()));
  }
  v1::ReportKvEventsResponse response;
  absl::MutexLock lock(&mu_);
  Hashing& hashing = hashing_[instance];
  // An incarnation seen for the first time: the index may not know what ranks that
  // publish nothing now hold (a router restart, or the instance was dropped), so every
  // rank is asked for a snapshot.
  const bool new_incarnation = report.incarnation() > hashing.incarnation;
  if (report.incarnation() >= hashing.incarnation) {
    hashing = {report.hash_salt(), report.tokens_per_block(), report.incarnation()};
  }
  for (const v1::KvEventSnapshot& s : report.snapshots()) {
    index_.ApplySnapshot({instance, s.rank(), report.incarnation(), s.seq(),
                          std::vector<uint64_t>(s.keys().begin(), s.keys().end()),
                          std::vector<uint64_t>(s.host_keys().begin(), s.host_keys().end()),
                          std::vector<uint64_t>(s.disk_keys().begin(), s.disk_keys().end())});
    ++snapshots_;
  }
  std::vector<int32_t> behind;
  for (const v1::KvEventBatch& b : report.batches()) {
    ++batches_;
    const auto keys = [](const auto& repeated) {
      return std::vector<uint64_t>(repeated.begin(), repeated.end());
    };
    const bool in_sync =
        index_.Apply({instance, b.rank(), report.incarnation(), b.seq(), keys(b.committed()),
                      keys(b.evicted()), keys(b.host_stored()), keys(b.host_removed()),
                      keys(b.disk_stored()), keys(b.disk_removed())});
    if (!in_sync && std::find(behind.begin(), behind.end(), b.rank()) == behind.end()) {
      behind.push_back(b.rank());
    }
  }
  if (new_incarnation) {
    for (int32_t rank = 0; rank < report.world_size(); ++rank) {
      const bool sent = std::any_of(report.snapshots().begin(), report.snapshots().end(),
                                    [&](const v1::KvEventSnapshot& s) { return s.rank() == rank; });
      if (!sent && std::find(behind.begin(), behind.end(), rank) == behind.end()) {
        behind.push_back(rank);
      }
    }
  }
  std::sort(behind.begin(), behind.end());
  response.mutable_snapshot_ranks()->Assign(behind.begin(), behind.end());
  return response;
}

void KvRouting::RemoveInstance(const std::string& instance) {
  absl::MutexLock lock(&mu_);
  hashing_.erase(instance);
  index_.RemoveInstance(instance);
}

KvRouting::PrefixLookup KvRouting::Lookup(absl::Span<const int32_t> prompt) {
  PrefixLookup lookup;
  if (prompt.size() < 2) return lookup;
  const absl::Span<const int32_t> reusable = prompt.first(prompt.size() - 1);
  lookup.max_tokens = static_cast<int64_t>(reusable.size());
  // Instances grouped by hashing scheme, each group's chain computed once.
  std::vector<std::pair<Hashing, std::vector<std::string>>> groups;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& entry : hashing_) {
      const Hashing& hashing = entry.second;
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&](const auto& g) { return g.first == hashing; });
      if (group == groups.end()) group = groups.insert(groups.end(), {hashing, {}});
      group->second.push_back(entry.first);
    }
  }
  for (const auto& [hashing, instances] : groups) {
    const std::vector<uint64_t> chain =
        kv::PrefixHashChain(hashing.salt, hashing.tokens_per_block, reusable);
    if (chain.empty()) continue;
    const std::vector<KvPrefixMatch> matches = index_.Match(chain);
    for (const std::string& instance : instances) {
      auto& [tokens_per_block, mine] = lookup.by_instance[instance];
      tokens_per_block = hashing.tokens_per_block;
      for (const KvPrefixMatch& m : matches) {
        if (m.instance == instance) mine.push_back(m);
      }
    }
  }
  return lookup;
}

void KvRouting::Fill(const PrefixLookup& lookup, std::vector<KvCandidate>* candidates,
                     const KvAwareWeights& weights) {
  for (KvCandidate& c : *candidates) {
    c.cached_tokens = 0;
    c.cached_host_tokens = 0;
    c.cached_disk_tokens = 0;
    c.cached_rank = -1;
    c.cached_by_rank.clear();
    const auto it = lookup.by_instance.find(c.name);
    if (it == lookup.by_instance.end()) continue;
    const auto& [tokens_per_block, matches] = it->second;
    ApplyPrefixMatches(matches, tokens_per_block, lookup.max_tokens, c, weights);
  }
}

void KvRouting::FillPrefixes(absl::Span<const int32_t> prompt, std::vector<KvCandidate>* candidates,
                             const KvAwareWeights& weights) {
  Fill(Lookup(prompt), candidates, weights);
}

KvRoutingStats KvRouting::Stats() const {
  KvRoutingStats stats;
  {
    absl::MutexLock lock(&mu_);
    stats.batches = batches_;
    stats.snapshots = snapshots_;
  }
  stats.keys = static_cast<int64_t>(index_.size());
  stats.resyncs = index_.resyncs();
  stats.sources = index_.Sources();
  return stats;
}

}  // namespace lockstep::router

#include "runtime/router/kv_routing.h"

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
  if (report.incarnation() >= hashing.incarnation) {
    hashing = {report.hash_salt(), report.tokens_per_block(), report.incarnation()};
  }
  for (const v1::KvEventSnapshot& s : report.snapshots()) {
    index_.ApplySnapshot({instance, s.rank(), report.incarnation(), s.seq(),
                          std::vector<uint64_t>(s.keys().begin(), s.keys().end())});
    ++snapshots_;
  }
  std::vector<int32_t> behind;
  for (const v1::KvEventBatch& b : report.batches()) {
    ++batches_;
    const bool in_sync =
        index_.Apply({instance, b.rank(), report.incarnation(), b.seq(),
                      std::vector<uint64_t>(b.committed().begin(), b.committed().end()),
                      std::vector<uint64_t>(b.evicted().begin(), b.evicted().end())});
    if (!in_sync && std::find(behind.begin(), behind.end(), b.rank()) == behind.end()) {
      behind.push_back(b.rank());
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

void KvRouting::FillPrefixes(absl::Span<const int32_t> prompt,
                             std::vector<KvCandidate>* candidates) {
  for (KvCandidate& c : *candidates) {
    c.cached_tokens = 0;
    c.cached_rank = -1;
    c.cached_by_rank.clear();
  }
  if (prompt.size() < 2) return;
  // Candidates grouped by hashing scheme, each group's chain computed once.
  std::vector<std::pair<Hashing, std::vector<size_t>>> groups;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < candidates->size(); ++i) {
      const auto it = hashing_.find((*candidates)[i].name);
      if (it == hashing_.end()) continue;
      auto group = std::find_if(groups.begin(), groups.end(),
                                [&](const auto& g) { return g.first == it->second; });
      if (group == groups.end()) group = groups.insert(groups.end(), {it->second, {}});
      group->second.push_back(i);
    }
  }
  const absl::Span<const int32_t> reusable = prompt.first(prompt.size() - 1);
  for (const auto& [hashing, members] : groups) {
    const std::vector<uint64_t> chain =
        kv::PrefixHashChain(hashing.salt, hashing.tokens_per_block, reusable);
    if (chain.empty()) continue;
    const std::vector<KvPrefixMatch> matches = index_.Match(chain);
    std::vector<KvCandidate> group;
    group.reserve(members.size());
    for (size_t i : members) group.push_back(std::move((*candidates)[i]));
    ApplyPrefixMatches(matches, hashing.tokens_per_block, static_cast<int64_t>(reusable.size()),
                       &group);
    for (size_t k = 0; k < members.size(); ++k) (*candidates)[members[k]] = std::move(group[k]);
  }
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

#include "runtime/router/core/instance_registry.h"

#include <algorithm>
#include <utility>

#include "absl/algorithm/container.h"
#include "fmt/format.h"
#include "runtime/router/routing/queue_limit.h"
#include "runtime/router/routing/routing_policy.h"

namespace lockstep::router {

std::string_view InstanceHealthName(InstanceHealth health) {
  switch (health) {
    case InstanceHealth::kUnknown:
      return "unknown";
    case InstanceHealth::kHealthy:
      return "healthy";
    case InstanceHealth::kDraining:
      return "draining";
    case InstanceHealth::kUnhealthy:
      return "unhealthy";
  }
  return "?";
}

InstanceRegistry::InstanceRegistry(Options options,
                                   const std::vector<config::InstanceConfig>& configured,
                                   Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  absl::MutexLock lock(&mu_);
  for (const config::InstanceConfig& instance : configured) {
    Entry& entry = entries_[instance.name];
    entry.state.name = instance.name;
    entry.state.role = instance.role;
    entry.state.world_size = static_cast<int32_t>(instance.world_size);
    entry.state.address = instance.leader_address;
    entry.state.model = options_.model;
    entry.state.from_config = true;
    entry.state.reason = instance.leader_address.empty() ? "not registered" : "not polled yet";
    if (!instance.leader_address.empty()) entry.state.epoch = next_epoch_++;
  }
}

absl::Status InstanceRegistry::Register(const std::string& name, config::InstanceRole role,
                                        int32_t world_size, const std::string& address,
                                        const std::string& model) {
  if (name.empty()) return absl::InvalidArgumentError("Register: instance name is empty");
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        fmt::format("Register {}: world_size must be >= 1, got {}", name, world_size));
  }
  if (absl::Status status =
          config::ValidateHostPort(fmt::format("Register {}: leader_address", name), address);
      !status.ok()) {
    return status;
  }
  if (model != options_.model) {
    return absl::InvalidArgumentError(
        fmt::format("Register {}: this router serves model '{}', the instance serves '{}'", name,
                    options_.model, model));
  }
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.state.from_config &&
      (it->second.state.role != role || it->second.state.world_size != world_size)) {
    return absl::InvalidArgumentError(
        fmt::format("Register {}: the config says role {} world_size {}, the instance says role {} "
                    "world_size {}",
                    name, config::InstanceRoleName(it->second.state.role),
                    it->second.state.world_size, config::InstanceRoleName(role), world_size));
  }
  Entry& entry = entries_[name];
  entry.state.name = name;
  entry.state.role = role;
  entry.state.world_size = world_size;
  entry.state.address = address;
  entry.state.model = model;
  entry.state.registered = true;
  entry.state.health = InstanceHealth::kHealthy;
  entry.state.reason.clear();
  entry.state.unhealthy_since = absl::InfinitePast();
  entry.state.last_heartbeat = clock_.Now();
  entry.state.epoch = next_epoch_++;
  entry.state.has_stats = false;
  entry.cause = Cause::kNone;
  entry.failed_polls = 0;
  // It may have restarted: what it held is gone until it reports again.
  if (options_.kv != nullptr) options_.kv->RemoveInstance(name);
  return absl::OkStatus();
}

bool InstanceRegistry::Heartbeat(const std::string& name, const LoadReport& load) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || !it->second.state.registered) return false;
  Entry& entry = it->second;
  if (entry.cause == Cause::kHeartbeat) return false;  // lapsed: must register again
  entry.state.last_heartbeat = clock_.Now();
  entry.state.load = load;
  return true;
}

absl::Status InstanceRegistry::CheckRanks(const std::string& name, int32_t world_size,
                                          absl::Span<const int32_t> ranks) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || (!it->second.state.from_config && !it->second.state.registered)) {
    return absl::FailedPreconditionError(
        fmt::format("instance '{}' is neither configured nor registered", name));
  }
  const InstanceState& state = it->second.state;
  const char* source = state.registered ? "registered" : "configured";
  if (world_size != 0 && world_size != state.world_size) {
    return absl::InvalidArgumentError(
        fmt::format("instance {} is {} with world_size {}, the report says world_size {}", name,
                    source, state.world_size, world_size));
  }
  for (int32_t rank : ranks) {
    if (rank < 0 || rank >= state.world_size) {
      return absl::InvalidArgumentError(
          fmt::format("instance {} is {} with world_size {}, the report names rank {}", name,
                      source, state.world_size, rank));
    }
  }
  return absl::OkStatus();
}

bool InstanceRegistry::MarkUnhealthy(Entry& entry, Cause cause, std::string reason,
                                     absl::Time now) {
  const bool was_serving = entry.state.health == InstanceHealth::kHealthy ||
                           entry.state.health == InstanceHealth::kDraining;
  if (entry.state.health != InstanceHealth::kUnhealthy) entry.state.unhealthy_since = now;
  entry.state.health = InstanceHealth::kUnhealthy;
  entry.state.reason = std::move(reason);
  entry.cause = cause;
  return was_serving;
}

bool InstanceRegistry::ReportPollOk(const InstanceTarget& target, bool draining) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(target.name);
  if (it == entries_.end() || it->second.state.epoch != target.epoch) return false;
  Entry& entry = it->second;
  entry.failed_polls = 0;
  if (entry.cause == Cause::kHeartbeat) return false;  // only Register restores it
  entry.cause = Cause::kNone;
  entry.state.unhealthy_since = absl::InfinitePast();
  entry.state.health = draining ? InstanceHealth::kDraining : InstanceHealth::kHealthy;
  entry.state.reason = draining ? "draining" : "";
  return false;
}

bool InstanceRegistry::ReportPollFailed(const InstanceTarget& target, const std::string& reason,
                                        bool immediate) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(target.name);
  if (it == entries_.end() || it->second.state.epoch != target.epoch) return false;
  Entry& entry = it->second;
  ++entry.failed_polls;
  if (entry.cause == Cause::kHeartbeat) return false;  // already out
  if (!immediate && entry.failed_polls < options_.failed_polls_to_unhealthy) return false;
  if (options_.kv != nullptr) options_.kv->RemoveInstance(target.name);
  return MarkUnhealthy(entry, immediate ? Cause::kNoProgress : Cause::kPoll, reason, clock_.Now());
}

void InstanceRegistry::ReportStats(const InstanceTarget& target, const v1::StatsResponse& stats) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(target.name);
  if (it == entries_.end() || it->second.state.epoch != target.epoch) return;
  it->second.state.stats = stats;
  it->second.state.has_stats = true;
}

std::vector<std::string> InstanceRegistry::ExpireHeartbeats() {
  const absl::Time now = clock_.Now();
  std::vector<std::string> expired;
  absl::MutexLock lock(&mu_);
  for (auto& [name, entry] : entries_) {
    if (!entry.state.registered || entry.cause == Cause::kHeartbeat) continue;
    const absl::Duration age = now - entry.state.last_heartbeat;
    if (age <= options_.heartbeat_timeout) continue;
    if (options_.kv != nullptr) options_.kv->RemoveInstance(name);
    if (MarkUnhealthy(
            entry, Cause::kHeartbeat,
            fmt::format("no heartbeat for {} ms (timeout {} ms)", absl::ToInt64Milliseconds(age),
                        absl::ToInt64Milliseconds(options_.heartbeat_timeout)),
            now)) {
      expired.push_back(name);
    }
  }
  return expired;
}

absl::StatusOr<InstanceTarget> InstanceRegistry::Acquire(config::InstanceRole role,
                                                         absl::Span<const std::string> exclude,
                                                         absl::Span<const int32_t> prompt) {
  // Hashing and matching the prompt happen before the lock, so routing long prompts
  // does not serialize on it.
  KvRouting::PrefixLookup prefixes;
  if (options_.kv != nullptr && !prompt.empty()) prefixes = options_.kv->Lookup(prompt);
  absl::MutexLock lock(&mu_);
  std::vector<KvCandidate> candidates;
  std::vector<Entry*> entries;
  bool full = false;  // a healthy one at max_queued_requests
  for (auto& [name, entry] : entries_) {
    if (entry.state.role != role || entry.state.health != InstanceHealth::kHealthy) continue;
    if (absl::c_linear_search(exclude, name)) continue;
    if (!HasQueueRoom(entry.state.in_flight, options_.max_queued_requests)) {
      full = true;
      continue;
    }
    candidates.push_back({.name = name,
                          .in_flight = entry.state.in_flight,
                          .queued = entry.state.load.queued_requests,
                          .free_blocks = entry.state.load.free_blocks});
    entries.push_back(&entry);
  }
  if (candidates.empty() && full) {
    return QueueFullStatus(config::InstanceRoleName(role), options_.max_queued_requests);
  }
  if (candidates.empty()) {
    return absl::UnavailableError(
        fmt::format("no healthy {} instance is available", config::InstanceRoleName(role)));
  }
  if (options_.kv != nullptr && !prompt.empty()) {
    KvRouting::Fill(prefixes, &candidates, options_.kv_weights);
  }
  uint64_t* cursor = &cursors_[static_cast<int>(role)];
  size_t pick = 0;
  InstanceTarget target;
  if (options_.policy == config::RoutingPolicy::kKvAware) {
    const KvAwareDecision decision =
        PickKvAware(options_.kv_weights, candidates,
                    std::max<int64_t>(1, static_cast<int64_t>(prompt.size())), cursor);
    pick = decision.index;
    target.reason = decision.reason;
    target.rank_hint = decision.rank_hint;
  } else {
    std::vector<RoutingCandidate> plain;
    plain.reserve(candidates.size());
    for (const KvCandidate& c : candidates) plain.push_back({c.name, c.in_flight, c.free_blocks});
    pick = PickCandidate(options_.policy, plain, cursor);
    target.reason = options_.policy == config::RoutingPolicy::kRoundRobin
                        ? RoutingReason::kRoundRobin
                        : RoutingReason::kLoad;
  }
  Entry& entry = *entries[pick];
  ++entry.state.in_flight;
  target.name = entry.state.name;
  target.address = entry.state.address;
  target.epoch = entry.state.epoch;
  target.cached_by_rank = std::move(candidates[pick].cached_by_rank);
  return target;
}

void InstanceRegistry::Release(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.state.in_flight > 0) --it->second.state.in_flight;
}

bool InstanceRegistry::IsHealthy(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.state.health == InstanceHealth::kHealthy;
}

bool InstanceRegistry::IsServing(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  return it != entries_.end() && (it->second.state.health == InstanceHealth::kHealthy ||
                                  it->second.state.health == InstanceHealth::kDraining);
}

bool InstanceRegistry::HasHealthy(config::InstanceRole role,
                                  absl::Span<const std::string> exclude) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, entry] : entries_) {
    if (entry.state.role == role && entry.state.health == InstanceHealth::kHealthy &&
        !absl::c_linear_search(exclude, name)) {
      return true;
    }
  }
  return false;
}

bool InstanceRegistry::HasRoom(config::InstanceRole role,
                               absl::Span<const std::string> exclude) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, entry] : entries_) {
    if (entry.state.role == role && entry.state.health == InstanceHealth::kHealthy &&
        HasQueueRoom(entry.state.in_flight, options_.max_queued_requests) &&
        !absl::c_linear_search(exclude, name)) {
      return true;
    }
  }
  return false;
}

std::vector<InstanceTarget> InstanceRegistry::PollTargets() const {
  absl::MutexLock lock(&mu_);
  std::vector<InstanceTarget> targets;
  for (const auto& [name, entry] : entries_) {
    if (!entry.state.address.empty()) {
      targets.push_back({name, entry.state.address, entry.state.epoch});
    }
  }
  return targets;
}

std::vector<InstanceState> InstanceRegistry::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<InstanceState> states;
  states.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) states.push_back(entry.state);
  return states;
}

}  // namespace lockstep::router

// The router's view of the instances it can route to: who they are (from the config
// and from Register), whether they take new requests (heartbeats and health polls),
// their last reported load and stats, and how many requests this router has in
// flight on each. Routing picks among the healthy instances of a role by the policy.
//
// Health of an instance:
//   unknown    known from the config, not registered (or not polled yet): no requests
//   healthy    registered (or polled OK) and heartbeating: takes new requests
//   draining   reports it is draining: no new requests; in-flight ones go on
//   unhealthy  missed heartbeats, failed health polls, or reports no progress: no new
//              requests, and the caller cancels its in-flight ones. After missed
//              heartbeats the instance must register again (Heartbeat answers
//              "reregister"); after failed polls a successful poll restores it.
// Each (re-)registration starts a new epoch; poll results for an older epoch are
// ignored.
//
// Thread safety: thread-safe (one mutex, short critical sections, no callbacks).
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_INSTANCE_REGISTRY_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_INSTANCE_REGISTRY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "proto/worker.pb.h"
#include "runtime/config/deployment_config.h"
#include "runtime/router/routing/kv_aware_policy.h"
#include "runtime/router/routing/kv_routing.h"

namespace lockstep::router {

enum class InstanceHealth { kUnknown, kHealthy, kDraining, kUnhealthy };
std::string_view InstanceHealthName(InstanceHealth health);

struct LoadReport {
  int64_t active_requests = 0;
  int64_t queued_requests = 0;
  int64_t free_blocks = 0;
};

// A copy of one instance's state.
struct InstanceState {
  std::string name;
  config::InstanceRole role = config::InstanceRole::kAggregated;
  int32_t world_size = 0;
  std::string address;  // leader's WorkerService; empty until known
  std::string model;
  bool from_config = false;
  bool registered = false;
  InstanceHealth health = InstanceHealth::kUnknown;
  std::string reason;  // why not healthy
  // When it last went from serving (or unknown) to unhealthy, by the router's clock;
  // InfinitePast while it is not unhealthy.
  absl::Time unhealthy_since = absl::InfinitePast();
  absl::Time last_heartbeat = absl::InfinitePast();
  LoadReport load;
  int64_t in_flight = 0;
  uint64_t epoch = 0;
  bool has_stats = false;
  v1::StatsResponse stats;
};

// Where to send a request or a poll.
struct InstanceTarget {
  std::string name;
  std::string address;
  uint64_t epoch = 0;
  // From Acquire: why this instance, the rank to hint (kv_aware; -1: none), and the
  // prompt's cached prefix tokens per rank as the KV index showed them (empty without
  // a prompt or KV events).
  RoutingReason reason = RoutingReason::kLoad;
  int32_t rank_hint = -1;
  std::vector<int64_t> cached_by_rank;
};

class InstanceRegistry {
 public:
  struct Options {
    std::string model;  // the served model; registrations must match
    config::RoutingPolicy policy = config::RoutingPolicy::kRoundRobin;
    absl::Duration heartbeat_timeout = absl::Seconds(2);
    // Consecutive failed health polls before an instance is unhealthy.
    int failed_polls_to_unhealthy = 2;
    // Where prompts' prefixes are cached (not owned; null: nowhere). An instance that
    // registers or stops serving is removed from it.
    KvRouting* kv = nullptr;
    KvAwareWeights kv_weights;  // policy kv_aware
    // router.max_queued_requests (routing/queue_limit.h): an instance with this many requests
    // in flight from this router is not picked. 0: no limit.
    int64_t max_queued_requests = 0;
  };

  // Instances named in the config start as unknown (or, with a leader_address, as
  // polled but not yet confirmed). `clock` must outlive the registry.
  InstanceRegistry(Options options, const std::vector<config::InstanceConfig>& configured,
                   Clock& clock);

  // A leader announces its instance. Errors: a bad field, a model other than the served
  // one, or a role / world size different from the config's entry of that name.
  absl::Status Register(const std::string& name, config::InstanceRole role, int32_t world_size,
                        const std::string& address, const std::string& model)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns false when the instance must register (again).
  bool Heartbeat(const std::string& name, const LoadReport& load) ABSL_LOCKS_EXCLUDED(mu_);

  // Checks what a leader's report (ReportKvEvents) says of its ranks against the instance
  // this registry knows (the config's entry, or what it registered): `world_size`, when
  // given (> 0), must be the instance's, and every rank in [0, world size). Errors:
  // FAILED_PRECONDITION for an instance neither configured nor registered,
  // INVALID_ARGUMENT naming both values otherwise.
  absl::Status CheckRanks(const std::string& name, int32_t world_size,
                          absl::Span<const int32_t> ranks) const ABSL_LOCKS_EXCLUDED(mu_);

  // Health poll results for `target` (ignored if it re-registered since). Each returns
  // true when the instance just stopped being healthy: cancel its in-flight requests.
  bool ReportPollOk(const InstanceTarget& target, bool draining) ABSL_LOCKS_EXCLUDED(mu_);
  bool ReportPollFailed(const InstanceTarget& target, const std::string& reason, bool immediate)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ReportStats(const InstanceTarget& target, const v1::StatsResponse& stats)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Registered instances whose last heartbeat is older than the timeout become
  // unhealthy; returns the names that just did.
  std::vector<std::string> ExpireHeartbeats() ABSL_LOCKS_EXCLUDED(mu_);

  // Picks a healthy instance of `role` (none of `exclude`: e.g. the instances a migrated
  // request failed on) below max_queued_requests by the policy and counts a request in
  // flight on it (Release ends that). With `prompt`, looks up its cached prefix on every
  // candidate (kv_aware routes by it; every policy reports it). UNAVAILABLE when there is
  // no healthy one; RESOURCE_EXHAUSTED (QueueFullStatus) when every healthy one is at
  // the limit.
  absl::StatusOr<InstanceTarget> Acquire(config::InstanceRole role,
                                         absl::Span<const std::string> exclude = {},
                                         absl::Span<const int32_t> prompt = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);

  bool IsHealthy(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // Healthy or draining: requests already on it may go on.
  bool IsServing(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  bool HasHealthy(config::InstanceRole role, absl::Span<const std::string> exclude = {}) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // A healthy instance of `role` below max_queued_requests exists (Acquire would pick
  // one now).
  bool HasRoom(config::InstanceRole role, absl::Span<const std::string> exclude = {}) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Instances with a known address, to poll.
  std::vector<InstanceTarget> PollTargets() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every instance, by name.
  std::vector<InstanceState> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Cause { kNone, kHeartbeat, kPoll, kNoProgress };
  struct Entry {
    InstanceState state;
    Cause cause = Cause::kNone;
    int failed_polls = 0;
  };

  // Sets `entry` unhealthy (since `now`, unless it already was); true if it was healthy
  // or draining (had flows to cancel).
  static bool MarkUnhealthy(Entry& entry, Cause cause, std::string reason, absl::Time now);

  const Options options_;
  Clock& clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by name
  uint64_t next_epoch_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t cursors_[3] ABSL_GUARDED_BY(mu_) = {0, 0, 0};  // per role, for the policy
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_INSTANCE_REGISTRY_H_

// Responses the router received from each instance's Generate streams: the health
// monitor's evidence that an instance whose health poll went unanswered is busy, not
// dead (a missed poll while its streams make progress does not count against it).
//
// A leg takes its instance's counter once (For) and adds to it per response without a
// lock.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_CORE_INSTANCE_PROGRESS_H_
#define LOCKSTEP_RUNTIME_ROUTER_CORE_INSTANCE_PROGRESS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace lockstep::router {

class InstanceProgress {
 public:
  using Counter = std::shared_ptr<std::atomic<int64_t>>;

  // The counter of `instance` (created at 0 on first use).
  Counter For(const std::string& instance) ABSL_LOCKS_EXCLUDED(mu_);
  // Responses counted for `instance` so far (0 if none).
  int64_t Read(const std::string& instance) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Counter> counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_CORE_INSTANCE_PROGRESS_H_

// What enters an instance: new requests, cancellations and the drain order. The leader
// collects them from client threads (Inbox) and broadcasts them to every rank in each
// step's intake (docs/design.md §3 phase 1, which runs after the rank-local transfer
// poll of phase 2).
#ifndef LOCKSTEP_RUNTIME_EXECUTOR_INTAKE_H_
#define LOCKSTEP_RUNTIME_EXECUTOR_INTAKE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/ids.h"
#include "runtime/executor/request_spec.h"

namespace lockstep::exec {

// One step's broadcast from the leader. Encode/Decode are its inter-rank codec (each
// request through request_spec_codec.h).
struct IntakeBatch {
  std::vector<NewRequestSpec> requests;
  std::vector<RequestId> cancels;
  bool drain = false;
  // The drain deadline passed on the leader's clock: every rank fails what is left in
  // the same step (no rank decides this on its own clock).
  bool drain_expired = false;

  bool empty() const { return requests.empty() && cancels.empty() && !drain && !drain_expired; }
  std::string Encode() const;
  static absl::StatusOr<IntakeBatch> Decode(const std::string& bytes);
};

// Thread-safe queue from client threads to the leader's executor thread.
class Inbox {
 public:
  void Push(NewRequestSpec spec) ABSL_LOCKS_EXCLUDED(mu_);
  void Cancel(RequestId id) ABSL_LOCKS_EXCLUDED(mu_);
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);
  // Moves everything queued into `batch` (executor thread).
  void TakeAll(IntakeBatch* batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until something is queued or `timeout` passes; true if something is.
  bool WaitForWork(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  IntakeBatch pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::exec

#endif  // LOCKSTEP_RUNTIME_EXECUTOR_INTAKE_H_

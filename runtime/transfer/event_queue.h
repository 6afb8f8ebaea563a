// The events of ended transfers (transceiver.h), in the order they ended. Transfer
// threads push; the executor thread drains them in Poll.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_EVENT_QUEUE_H_
#define LOCKSTEP_RUNTIME_TRANSFER_EVENT_QUEUE_H_

#include <cstddef>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/transfer/transceiver.h"

namespace lockstep::transfer {

class EventQueue {
 public:
  void Push(TransferEvent event) ABSL_LOCKS_EXCLUDED(mu_);

  // Every event pushed since the last call, oldest first.
  std::vector<TransferEvent> Drain() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until an event is queued or `timeout` has passed; true when one is queued.
  bool WaitNonEmpty(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::vector<TransferEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_EVENT_QUEUE_H_

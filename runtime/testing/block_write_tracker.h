// BlockWriteTracker: which KV blocks an engine batch that has not been collected yet
// may still touch, shared by the FakeEngine and the FakeTransceiver of one rank in the
// simulator. A KV receive that starts writing a block an uncollected batch holds is
// the race where a batch's late writes corrupt freshly received KV; the fake
// transceiver refuses it, so the simulator fails loudly instead of silently.
//
// Thread safety: thread-safe.
#ifndef LOCKSTEP_RUNTIME_TESTING_BLOCK_WRITE_TRACKER_H_
#define LOCKSTEP_RUNTIME_TESTING_BLOCK_WRITE_TRACKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/ids.h"

namespace lockstep::engine {

class BlockWriteTracker {
 public:
  // Pool 0 is the target pool, 1 the draft pool.
  struct Block {
    int pool = 0;
    int32_t block = 0;
  };

  // The batch of `step` was launched holding `blocks`.
  void Launched(int64_t step, const std::vector<Block>& blocks) ABSL_LOCKS_EXCLUDED(mu_);
  // The batch of `step` was collected: it touches nothing any more.
  void Collected(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  // The step of an uncollected batch holding `block`, if any.
  std::optional<int64_t> Holder(int pool, int32_t block) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  // (pool, block) -> steps of uncollected batches holding it.
  absl::flat_hash_map<int64_t, std::vector<int64_t>> holders_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::vector<int64_t>> batches_ ABSL_GUARDED_BY(mu_);  // step -> keys
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_TESTING_BLOCK_WRITE_TRACKER_H_

// Test double: a host slab's copier (HostBlockCopier) whose first copy-out (of one
// block, or of any) holds until the test releases it, so a test knows a tier job is running and can
// keep it running as long as it likes (a stuck device or disk, tier_worker.h).
//
//   GatedCopier copier(slab.data(), layout, blocks);
//   ... enqueue a copy-down; copier.started.WaitForNotification();
//   copier.release.Notify();              // the copy goes on
//   copier.finished.WaitForNotification(); // done with the copier and the slab
//
// Thread safety: the notifications are; the copier is as HostBlockCopier.
#ifndef LOCKSTEP_KVCACHE_TESTING_GATED_COPIER_H_
#define LOCKSTEP_KVCACHE_TESTING_GATED_COPIER_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/types/span.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"

namespace lockstep::kv {

class GatedCopier : public HostBlockCopier {
 public:
  // Holds the first copy-out of block `gated`, or with -1 the first copy-out of any.
  GatedCopier(std::byte* base, const BlockLayout& layout, int32_t blocks, int32_t gated = -1)
      : HostBlockCopier(base, layout, blocks), gated_(gated) {}
  absl::Notification started;   // the first copy-out began
  absl::Notification release;   // set by the test: the first copy-out may go on
  absl::Notification finished;  // the first copy-out copied (last touch of the copier)

 protected:
  absl::Status DoCopyOut(absl::Span<const BlockSpan> spans, absl::Span<std::byte> host) override {
    if (started.HasBeenNotified() || (gated_ >= 0 && spans[0].block.value() != gated_)) {
      return HostBlockCopier::DoCopyOut(spans, host);
    }
    started.Notify();
    release.WaitForNotification();
    absl::Status status = HostBlockCopier::DoCopyOut(spans, host);
    finished.Notify();
    return status;
  }

 private:
  const int32_t gated_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TESTING_GATED_COPIER_H_

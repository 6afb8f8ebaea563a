// TierPins: host-tier blocks pinned for transfer claims, so that a disaggregated
// request's transfer reads them from the host tier directly (docs/design.md §5.1).
//
// The rule. At hand-off, each full target block of the prompt whose prefix key the host
// tier holds (same parent and tokens) is pinned and named in the claim's HostBlocks;
// the transfer reads those bytes from host memory and every other block (the partial
// last block, blocks only on the device or on disk, draft blocks) through the pool's
// copier. Why that is the cheaper read: the context leg always computes the prompt's
// last token (it produces the first token), and that prefill attends to every prefix
// block, so a prefix found below the device is onboarded before the prefill in any case
// and cannot stay host-only; what is left to save is the transfer's read, a
// device-to-host copy on a device pool, against a host memory read of the same bytes
// (on a host-memory pool both are one memcpy: no dearer). The price is host capacity:
// pinned entries are not evicted while their claim lives, so pins are capped at half
// the host tier and a block beyond the cap is read from the device.
//
// Lifetime. Pins are held under the request id and dropped by Release(id), which the
// executor calls once the claim ended (completed, failed, cancelled or expired: the
// transfer no longer reads the bytes), counting the blocks the transfer read.
//
// Thread safety: like KvManager, which owns it: the executor thread only.
#ifndef LOCKSTEP_KVCACHE_TIER_PINS_H_
#define LOCKSTEP_KVCACHE_TIER_PINS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/host_blocks.h"
#include "kvcache/kv_tiers.h"

namespace lockstep::kv {

class TierPins {
 public:
  // `tiers` (not owned) must outlive this; `salt` is the target pool's reuse salt.
  TierPins(KvTiers* tiers, int tokens_per_block, uint64_t salt);

  // Pins the host copies of blocks [0, num_blocks) of `prompt`'s chain, in the order of
  // `id`'s block table. Null when none was pinned. AlreadyExists when `id` holds pins.
  absl::StatusOr<std::shared_ptr<const HostBlocks>> Pin(RequestId id,
                                                        absl::Span<const int32_t> prompt,
                                                        int64_t num_blocks);
  // The same where `keys` hold the chain's keys (at least num_blocks of them, as far
  // as `prompt` has full blocks; a request's prefix keys): nothing is hashed.
  // InvalidArgument when there are fewer.
  absl::StatusOr<std::shared_ptr<const HostBlocks>> Pin(RequestId id,
                                                        absl::Span<const int32_t> prompt,
                                                        absl::Span<const uint64_t> keys,
                                                        int64_t num_blocks);
  // Drops `id`'s pins (no-op without) and counts the blocks its transfer read.
  void Release(RequestId id);
  bool Holds(RequestId id) const { return held_.contains(id); }

  // Pins held by an id outside `owners`, and held pins that are not the tiers' count.
  void AuditInto(const std::string& prefix, const absl::flat_hash_set<RequestId>& owners,
                 std::vector<std::string>* out) const;

 private:
  struct Held {
    std::vector<uint64_t> keys;  // pinned, one pin each
    std::shared_ptr<HostBlocks> blocks;
  };

  KvTiers* const tiers_;
  const int tokens_per_block_;
  const uint64_t salt_;
  absl::flat_hash_map<RequestId, Held> held_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_TIER_PINS_H_

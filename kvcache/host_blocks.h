// HostBlocks: the host-tier copies a transfer claim reads instead of some of its target
// device blocks (tier_pins.h has the rule; runtime/transfer/claim_blocks.h the reads).
// The KV manager fills it at hand-off and keeps the entries pinned until the claim's
// cache is released; the transfer's serving threads read `target` and count what they
// read.
//
// Thread safety: `target` is immutable once shared; the counter is atomic.
#ifndef LOCKSTEP_KVCACHE_HOST_BLOCKS_H_
#define LOCKSTEP_KVCACHE_HOST_BLOCKS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace lockstep::kv {

struct HostBlocks {
  // By target block-table index: the block's bytes in the host tier (one block each),
  // or null: read the device block.
  std::vector<std::shared_ptr<const std::vector<std::byte>>> target;
  // Bytes the transfer read from `target` (a block split over chunks counts per part).
  mutable std::atomic<int64_t> bytes_read{0};

  // The host copy of target block `index`, or null.
  const std::vector<std::byte>* Find(int64_t index) const {
    return index >= 0 && index < static_cast<int64_t>(target.size()) ? target[index].get()
                                                                     : nullptr;
  }
  int64_t count() const {
    int64_t n = 0;
    for (const auto& b : target) n += b != nullptr ? 1 : 0;
    return n;
  }
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_HOST_BLOCKS_H_

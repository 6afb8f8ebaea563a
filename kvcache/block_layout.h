// The shape of one KV block. A pool's storage is one contiguous slab of
// `num_blocks * BlockFloats()` floats; block b starts at `b * BlockFloats()`.
//
// Layout inside a block: layers x {K, V} x kv_heads x tokens_per_block x head_dim,
// row-major, f32. The engine reads and writes K/V in place through these offsets; KV
// transfer copies whole blocks.
#ifndef LOCKSTEP_KVCACHE_BLOCK_LAYOUT_H_
#define LOCKSTEP_KVCACHE_BLOCK_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lockstep::kv {

struct BlockLayout {
  int num_layers = 1;
  int num_kv_heads = 1;
  int head_dim = 1;
  int tokens_per_block = 16;

  // Floats in one (layer, K-or-V, head) plane: tokens_per_block * head_dim.
  size_t PlaneFloats() const {
    return static_cast<size_t>(tokens_per_block) * static_cast<size_t>(head_dim);
  }
  size_t BlockFloats() const {
    return static_cast<size_t>(num_layers) * 2 * static_cast<size_t>(num_kv_heads) * PlaneFloats();
  }
  size_t BlockBytes() const { return BlockFloats() * sizeof(float); }

  // Offset (in floats, from the block start) of token `token` (0-based within the
  // block) of head `head` of K (kv = 0) or V (kv = 1) in layer `layer`.
  size_t Offset(int layer, int kv, int head, int token) const {
    return ((static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) *
                static_cast<size_t>(num_kv_heads) +
            static_cast<size_t>(head)) *
               PlaneFloats() +
           static_cast<size_t>(token) * static_cast<size_t>(head_dim);
  }

  // Number of blocks needed to hold `tokens` tokens.
  int64_t BlocksFor(int64_t tokens) const {
    return (tokens + tokens_per_block - 1) / tokens_per_block;
  }

  absl::Status Validate() const {
    if (num_layers < 1) return absl::InvalidArgumentError("num_layers must be >= 1");
    if (num_kv_heads < 1) return absl::InvalidArgumentError("num_kv_heads must be >= 1");
    if (head_dim < 1) return absl::InvalidArgumentError("head_dim must be >= 1");
    if (tokens_per_block < 1) {
      return absl::InvalidArgumentError("tokens_per_block must be >= 1");
    }
    return absl::OkStatus();
  }

  std::string ToString() const {
    return absl::StrCat("layers=", num_layers, " kv_heads=", num_kv_heads, " head_dim=", head_dim,
                        " tokens_per_block=", tokens_per_block);
  }

  friend bool operator==(const BlockLayout&, const BlockLayout&) = default;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_LAYOUT_H_

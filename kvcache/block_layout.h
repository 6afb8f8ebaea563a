// The shape of one KV block. A pool's storage is one contiguous slab of
// `num_blocks * BlockBytes()` bytes; block b starts at byte `b * BlockBytes()`.
//
// Layout inside a block: layers x {K, V} x kv_heads x tokens_per_block x head_dim,
// row-major, elements of `element_bytes` bytes (4: f32, the CPU engine's; 2: bf16).
// Engines read and write K/V in place through these offsets (in elements, or in bytes);
// KV transfer copies byte ranges of blocks through a BlockCopier (block_copier.h).
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
  // Bytes of one element: 4 (f32) or 2 (bf16); 1 is allowed for 8-bit types.
  int element_bytes = 4;

  // Elements in one (layer, K-or-V, head) plane: tokens_per_block * head_dim.
  size_t PlaneElements() const {
    return static_cast<size_t>(tokens_per_block) * static_cast<size_t>(head_dim);
  }
  // Elements in one block. For an f32 layout (element_bytes 4) these are floats.
  size_t BlockElements() const {
    return static_cast<size_t>(num_layers) * 2 * static_cast<size_t>(num_kv_heads) *
           PlaneElements();
  }
  size_t BlockBytes() const { return BlockElements() * static_cast<size_t>(element_bytes); }

  // Offset (in elements, from the block start) of token `token` (0-based within the
  // block) of head `head` of K (kv = 0) or V (kv = 1) in layer `layer`. For an f32
  // layout, a float offset into the block.
  size_t Offset(int layer, int kv, int head, int token) const {
    return ((static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) *
                static_cast<size_t>(num_kv_heads) +
            static_cast<size_t>(head)) *
               PlaneElements() +
           static_cast<size_t>(token) * static_cast<size_t>(head_dim);
  }
  // The same position in bytes from the block start.
  size_t ByteOffset(int layer, int kv, int head, int token) const {
    return Offset(layer, kv, head, token) * static_cast<size_t>(element_bytes);
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
    if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("element_bytes must be 1, 2 or 4, got ", element_bytes));
    }
    return absl::OkStatus();
  }

  std::string ToString() const {
    return absl::StrCat("layers=", num_layers, " kv_heads=", num_kv_heads, " head_dim=", head_dim,
                        " tokens_per_block=", tokens_per_block, " element_bytes=", element_bytes);
  }

  friend bool operator==(const BlockLayout&, const BlockLayout&) = default;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_LAYOUT_H_

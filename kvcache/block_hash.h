// Stable hashes for prefix reuse. A block's key is the hash of its tokens seeded with
// its parent's key, so the key of block i names the whole prefix [0, (i + 1) * tpb).
// The chain starts from `RootHash(salt)`, one salt per model / LoRA.
//
// The function (Hash64) is wyhash (final version 4, default secret) over the tokens'
// little-endian bytes, written out here so the value is the same in every process,
// build and machine (absl::Hash is seeded per process and must not be used for keys
// that name KV contents). It is fast on short inputs, which matters because a lookup
// hashes every block of a prompt in a chain. A match on the key is never trusted alone:
// the radix tree also compares the block's tokens.
#ifndef LOCKSTEP_KVCACHE_BLOCK_HASH_H_
#define LOCKSTEP_KVCACHE_BLOCK_HASH_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace lockstep::kv {

// wyhash (final 4, default secret) of `size` bytes at `data`, seeded with `seed`.
uint64_t Hash64(const uint8_t* data, size_t size, uint64_t seed);

// The key of the empty prefix for `salt`.
uint64_t RootHash(uint64_t salt);

// The key of a block holding `tokens` whose parent's key is `parent`. Reads each token
// as its 4 little-endian bytes.
uint64_t BlockHash(uint64_t parent, absl::Span<const int32_t> tokens);

// Signature of BlockHash; the radix tree takes one so tests can force collisions.
using BlockHasher = uint64_t (*)(uint64_t parent, absl::Span<const int32_t> tokens);

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_BLOCK_HASH_H_

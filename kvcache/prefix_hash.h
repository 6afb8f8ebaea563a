// The block-hash chain of a prompt: the keys the radix tree gives its full blocks
// (kvcache/block_hash.h), computed without a KV pool. Workers publish these keys in KV
// events and the router computes them for each prompt to find where a prefix is cached,
// so both sides must hash exactly alike: this is the one implementation.
//
//   std::vector<uint64_t> chain = PrefixHashChain(salt, tokens_per_block, prompt);
//   // chain[i] names the prefix [0, (i + 1) * tokens_per_block) of `prompt`.
#ifndef LOCKSTEP_KVCACHE_PREFIX_HASH_H_
#define LOCKSTEP_KVCACHE_PREFIX_HASH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace lockstep::kv {

// The keys of the full blocks of `tokens` (a trailing partial block has none), the
// first chained from RootHash(salt). `tokens_per_block` >= 1.
std::vector<uint64_t> PrefixHashChain(uint64_t salt, int tokens_per_block,
                                      absl::Span<const int32_t> tokens);

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_PREFIX_HASH_H_

// The block-hash chain of a prompt: the keys the radix tree gives its full blocks
// (kvcache/block_hash.h), computed without a KV pool. Workers publish these keys in KV
// events and the router computes them for each prompt to find where a prefix is cached,
// so both sides must hash exactly alike: this is the one implementation.
//
//   std::vector<uint64_t> chain = PrefixHashChain(salt, tokens_per_block, prompt);
//   // chain[i] names the prefix [0, (i + 1) * tokens_per_block) of `prompt`.
//
// A request keeps its chain in a PrefixKeys, made once and extended as its tokens grow,
// so admission's probe, the device tree's match and the tiers' fetch read the keys
// instead of each hashing the prompt again.
#ifndef LOCKSTEP_KVCACHE_PREFIX_HASH_H_
#define LOCKSTEP_KVCACHE_PREFIX_HASH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace lockstep::kv {

// The keys of the full blocks of `tokens` (a trailing partial block has none), the
// first chained from RootHash(salt). `tokens_per_block` >= 1.
std::vector<uint64_t> PrefixHashChain(uint64_t salt, int tokens_per_block,
                                      absl::Span<const int32_t> tokens);

// PrefixHashChain of a growing token sequence (a request's context), with the identity
// it was made under (salt, block size) and the sequence length it covers, so a lookup
// can reject keys made for another chain or a shorter sequence instead of using them.
// A key is never trusted alone: every hit also compares its block's parent and tokens,
// so keys of another sequence of the same length only miss.
// Thread-compatible; owned by whoever owns the sequence (the executor thread).
class PrefixKeys {
 public:
  PrefixKeys() = default;  // covers the empty sequence of no chain

  // Covers `tokens` under (`salt`, `tokens_per_block`): hashes only the full blocks past
  // those already made. `tokens` must begin with the sequence covered so far (a
  // request's context only grows); under another salt or block size, or given fewer
  // tokens than covered, it starts over. `tokens_per_block` >= 1.
  void Extend(uint64_t salt, int tokens_per_block, absl::Span<const int32_t> tokens);
  // Covers the empty sequence again, keeping the keys' memory.
  void Clear();

  // keys()[i] names the prefix [0, (i + 1) * tokens_per_block()).
  absl::Span<const uint64_t> keys() const { return keys_; }
  uint64_t salt() const { return salt_; }
  int tokens_per_block() const { return tokens_per_block_; }
  // The length of the sequence covered (its trailing partial block has no key).
  int64_t num_tokens() const { return num_tokens_; }

  // OK when these are the keys of a sequence of `num_tokens` tokens under (`salt`,
  // `tokens_per_block`); InvalidArgument naming what differs otherwise. A sequence of
  // fewer than `tokens_per_block` tokens needs no key: any empty PrefixKeys covers it.
  absl::Status CheckCovers(uint64_t salt, int tokens_per_block, int64_t num_tokens) const;
  // The same for a sequence of at least `num_tokens` tokens: its first
  // num_tokens / tokens_per_block keys are those of its first `num_tokens` tokens.
  absl::Status CheckCoversAtLeast(uint64_t salt, int tokens_per_block, int64_t num_tokens) const;

 private:
  // CheckCovers (`exact`) or CheckCoversAtLeast.
  absl::Status Check(uint64_t salt, int tokens_per_block, int64_t num_tokens, bool exact) const;

  uint64_t salt_ = 0;
  int tokens_per_block_ = 0;
  int64_t num_tokens_ = 0;
  std::vector<uint64_t> keys_;
};

}  // namespace lockstep::kv

#endif  // LOCKSTEP_KVCACHE_PREFIX_HASH_H_

#include "kvcache/prefix_hash.h"

#include "common/check.h"
#include "kvcache/block_hash.h"

namespace lockstep::kv {

std::vector<uint64_t> PrefixHashChain(uint64_t salt, int tokens_per_block,
                                      absl::Span<const int32_t> tokens) {
  LOCKSTEP_CHECK(tokens_per_block >= 1) << "tokens_per_block " << tokens_per_block;
  const size_t tpb = static_cast<size_t>(tokens_per_block);
  const size_t full = tokens.size() / tpb;
  std::vector<uint64_t> chain;
  chain.reserve(full);
  uint64_t parent = RootHash(salt);
  for (size_t b = 0; b < full; ++b) {
    parent = BlockHash(parent, tokens.subspan(b * tpb, tpb));
    chain.push_back(parent);
  }
  return chain;
}

}  // namespace lockstep::kv

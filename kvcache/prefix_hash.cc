#include "kvcache/prefix_hash.h"

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "kvcache/block_hash.h"

namespace lockstep::kv {

std::vector<uint64_t> PrefixHashChain(uint64_t salt, int tokens_per_block,
                                      absl::Span<const int32_t> tokens) {
  PrefixKeys keys;
  keys.Extend(salt, tokens_per_block, tokens);
  return {keys.keys().begin(), keys.keys().end()};
}

void PrefixKeys::Extend(uint64_t salt, int tokens_per_block, absl::Span<const int32_t> tokens) {
  LOCKSTEP_CHECK(tokens_per_block >= 1) << "tokens_per_block " << tokens_per_block;
  if (salt != salt_ || tokens_per_block != tokens_per_block_ ||
      static_cast<int64_t>(tokens.size()) < num_tokens_) {
    Clear();
    salt_ = salt;
    tokens_per_block_ = tokens_per_block;
  }
  const size_t tpb = static_cast<size_t>(tokens_per_block);
  const size_t full = tokens.size() / tpb;
  keys_.reserve(full);
  uint64_t parent = keys_.empty() ? RootHash(salt) : keys_.back();
  for (size_t b = keys_.size(); b < full; ++b) {
    parent = BlockHash(parent, tokens.subspan(b * tpb, tpb));
    keys_.push_back(parent);
  }
  num_tokens_ = static_cast<int64_t>(tokens.size());
}

void PrefixKeys::Clear() {
  keys_.clear();
  num_tokens_ = 0;
}

absl::Status PrefixKeys::CheckCovers(uint64_t salt, int tokens_per_block,
                                     int64_t num_tokens) const {
  return Check(salt, tokens_per_block, num_tokens, /*exact=*/true);
}

absl::Status PrefixKeys::CheckCoversAtLeast(uint64_t salt, int tokens_per_block,
                                            int64_t num_tokens) const {
  return Check(salt, tokens_per_block, num_tokens, /*exact=*/false);
}

absl::Status PrefixKeys::Check(uint64_t salt, int tokens_per_block, int64_t num_tokens,
                               bool exact) const {
  if (tokens_per_block >= 1 && num_tokens < tokens_per_block && keys_.empty()) {
    return absl::OkStatus();
  }
  if (salt != salt_ || tokens_per_block != tokens_per_block_) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix keys were made with salt ", salt_, " and ", tokens_per_block_,
                     " tokens a block; the pool uses salt ", salt, " and ", tokens_per_block));
  }
  if (exact ? num_tokens != num_tokens_ : num_tokens > num_tokens_) {
    return absl::InvalidArgumentError(absl::StrCat("prefix keys cover ", num_tokens_,
                                                   " tokens; the prompt has ", num_tokens,
                                                   " (stale keys)"));
  }
  return absl::OkStatus();
}

}  // namespace lockstep::kv

#include "kvcache/tier_pins.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kvcache/block_hash.h"
#include "kvcache/prefix_hash.h"

namespace lockstep::kv {

TierPins::TierPins(KvTiers* tiers, int tokens_per_block, uint64_t salt)
    : tiers_(tiers), tokens_per_block_(tokens_per_block), salt_(salt) {}

absl::StatusOr<std::shared_ptr<const HostBlocks>> TierPins::Pin(RequestId id,
                                                                absl::Span<const int32_t> prompt,
                                                                int64_t num_blocks) {
  const size_t tpb = static_cast<size_t>(tokens_per_block_);
  num_blocks = std::clamp<int64_t>(num_blocks, 0, static_cast<int64_t>(prompt.size() / tpb));
  return Pin(id, prompt,
             PrefixHashChain(salt_, tokens_per_block_,
                             prompt.first(static_cast<size_t>(num_blocks) * tpb)),
             num_blocks);
}

absl::StatusOr<std::shared_ptr<const HostBlocks>> TierPins::Pin(RequestId id,
                                                                absl::Span<const int32_t> prompt,
                                                                absl::Span<const uint64_t> keys,
                                                                int64_t num_blocks) {
  if (held_.contains(id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", id.value(), " already holds host tier pins"));
  }
  const size_t tpb = static_cast<size_t>(tokens_per_block_);
  num_blocks = std::min<int64_t>(num_blocks, static_cast<int64_t>(prompt.size() / tpb));
  if (num_blocks <= 0) return nullptr;
  if (static_cast<int64_t>(keys.size()) < num_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(keys.size(), " prefix keys for ", num_blocks, " blocks"));
  }
  const absl::Span<const uint64_t> chain = keys.first(static_cast<size_t>(num_blocks));
  Held held;
  held.blocks = std::make_shared<HostBlocks>();
  held.blocks->target.resize(chain.size());
  uint64_t parent = RootHash(salt_);
  for (size_t i = 0; i < chain.size(); ++i) {
    held.blocks->target[i] = tiers_->Pin(chain[i], parent, prompt.subspan(i * tpb, tpb));
    if (held.blocks->target[i] != nullptr) held.keys.push_back(chain[i]);
    parent = chain[i];
  }
  if (held.keys.empty()) return nullptr;
  std::shared_ptr<const HostBlocks> blocks = held.blocks;
  held_.emplace(id, std::move(held));
  return blocks;
}

void TierPins::Release(RequestId id) {
  const auto it = held_.find(id);
  if (it == held_.end()) return;
  for (const uint64_t key : it->second.keys) tiers_->Unpin(key);
  const auto block_bytes = static_cast<int64_t>(tiers_->block_bytes());
  tiers_->RecordServed(it->second.blocks->bytes_read.load() / block_bytes);
  held_.erase(it);
}

void TierPins::AuditInto(const std::string& prefix, const absl::flat_hash_set<RequestId>& owners,
                         std::vector<std::string>* out) const {
  int64_t pins = 0;
  for (const auto& [id, held] : held_) {
    pins += static_cast<int64_t>(held.keys.size());
    if (!owners.contains(id)) {
      out->push_back(absl::StrCat(prefix, "request ", id.value(), " holds ", held.keys.size(),
                                  " host tier pins but is neither live nor claimed"));
    }
  }
  const int64_t counted = tiers_->Stats().pinned_blocks;
  if (pins != counted) {
    out->push_back(absl::StrCat(prefix, "requests hold ", pins, " host tier pins, the tier counts ",
                                counted));
  }
}

}  // namespace lockstep::kv

#include "runtime/engine/fake/fake_kv_content.h"

#include "common/hash.h"

namespace lockstep::engine {

FakeKvContent::FakeKvContent(int32_t num_blocks, int32_t tokens_per_block)
    : tokens_per_block_(tokens_per_block),
      slots_(static_cast<size_t>(num_blocks > 0 ? num_blocks : 0) *
                 static_cast<size_t>(tokens_per_block),
             0) {}

size_t FakeKvContent::Slot(absl::Span<const BlockId> blocks, int64_t position) const {
  const BlockId block = blocks[static_cast<size_t>(position / tokens_per_block_)];
  return static_cast<size_t>(block.value()) * static_cast<size_t>(tokens_per_block_) +
         static_cast<size_t>(position % tokens_per_block_);
}

uint64_t FakeKvContent::At(absl::Span<const BlockId> blocks, int64_t position) const {
  return position < 0 ? kRoot : slots_[Slot(blocks, position)];
}

uint64_t FakeKvContent::Write(absl::Span<const BlockId> blocks, int64_t start,
                              absl::Span<const int32_t> tokens) {
  uint64_t chain = At(blocks, start - 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    chain = SplitMix64(chain * 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(tokens[i]));
    slots_[Slot(blocks, start + static_cast<int64_t>(i))] = chain;
  }
  return chain;
}

}  // namespace lockstep::engine

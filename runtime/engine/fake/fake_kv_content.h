// FakeKvContent: what the fake engine's KV pools would hold, for its KV contract
// checks. Each pool keeps one fingerprint per token slot (block * tokens_per_block +
// offset): a hash of the token chain from position 0 through that slot, as the step
// that wrote it saw it (0: never written). A step that continues a sequence extends
// the chain from the slot before its first position, read through the sequence's
// block table, so a prefix reused from another sequence's blocks continues that
// sequence's chain, and two pools that hold the same tokens at the same positions hold
// the same fingerprints (how the fake checks a draft pool against its target).
//
// Thread-compatible: the fake engine's thread owns it.
#ifndef LOCKSTEP_RUNTIME_ENGINE_FAKE_FAKE_KV_CONTENT_H_
#define LOCKSTEP_RUNTIME_ENGINE_FAKE_FAKE_KV_CONTENT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/ids.h"

namespace lockstep::engine {

class FakeKvContent {
 public:
  // The fingerprint "before position 0" of every sequence.
  static constexpr uint64_t kRoot = 1;

  FakeKvContent(int32_t num_blocks, int32_t tokens_per_block);

  // The fingerprint at `position` of the sequence with block table `blocks` (kRoot for
  // position -1). The caller has checked that the table covers it.
  uint64_t At(absl::Span<const BlockId> blocks, int64_t position) const;

  // Writes `tokens` at [start, start + size): the chain continues from At(start - 1).
  // Returns the fingerprint of the last token written (At(start - 1) when none).
  uint64_t Write(absl::Span<const BlockId> blocks, int64_t start, absl::Span<const int32_t> tokens);

 private:
  size_t Slot(absl::Span<const BlockId> blocks, int64_t position) const;

  const int32_t tokens_per_block_;
  std::vector<uint64_t> slots_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_FAKE_FAKE_KV_CONTENT_H_

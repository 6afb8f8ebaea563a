#include "runtime/engine/cpu/testing/prefill_logits.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/check.h"
#include "runtime/engine/cpu/arena.h"

namespace lockstep::engine::testing {

absl::Status PrefillLogits(const ForwardModel& model, HostPool& pool,
                           const std::vector<std::vector<int32_t>>& seqs, std::vector<float>& out) {
  std::vector<std::vector<BlockId>> blocks(seqs.size());
  std::vector<ForwardRow> rows;
  std::vector<SequenceKv> kv;
  std::vector<int32_t> logit_rows;
  for (size_t s = 0; s < seqs.size(); ++s) LOCKSTEP_CHECK_OK(pool.Cover(blocks[s], seqs[s].size()));
  for (size_t s = 0; s < seqs.size(); ++s) {
    kv.push_back(SequenceKv{absl::MakeConstSpan(blocks[s])});
    for (size_t j = 0; j < seqs[s].size(); ++j) {
      logit_rows.push_back(static_cast<int32_t>(rows.size()));
      rows.push_back({seqs[s][j], static_cast<int64_t>(j), static_cast<int32_t>(s)});
    }
  }
  Arena arena;
  absl::StatusOr<const float*> result =
      model.Forward({rows, kv, logit_rows}, pool.view(), arena, nullptr);
  if (!result.ok()) return result.status();
  out.assign(*result, *result + rows.size() * model.config().vocab_size);
  for (auto& b : blocks) {
    for (BlockId id : b) pool.Free(id);
  }
  return absl::OkStatus();
}

}  // namespace lockstep::engine::testing

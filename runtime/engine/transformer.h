// The forward of one decoder-only transformer over a batch of token rows from many
// sequences (context chunks, generation tokens, verify tokens, draft proposals).
//
// Per layer: RMSNorm -> fused QKV (+bias) -> [q/k norm] -> RoPE -> K/V written in place
// into each sequence's pool blocks (or spec buffer) -> paged causal attention per row
// -> O projection + residual -> RMSNorm -> SwiGLU MLP or MoE block + residual. Then the
// final norm and the LM head for the rows whose logits are asked for. All scratch comes
// from the caller's Arena.
//
// Batch invariance: every row's logits are bitwise the same whatever other rows and
// sequences share the forward and however many expert-parallel ranks there are.
//
// Thread-compatible: owned and used by the engine thread.
#ifndef LOCKSTEP_RUNTIME_ENGINE_TRANSFORMER_H_
#define LOCKSTEP_RUNTIME_ENGINE_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/arena.h"
#include "runtime/engine/model_config.h"
#include "runtime/engine/moe.h"
#include "runtime/engine/paged_attention.h"
#include "runtime/engine/parallel.h"
#include "runtime/engine/weights.h"

namespace lockstep::engine {

struct ForwardRow {
  int32_t token = 0;
  int64_t position = 0;
  int32_t seq = 0;  // index into ForwardInput::seqs
};

// The rows of one sequence are contiguous and in increasing position; a row attends to
// every earlier position of its sequence (already in KV, or written by an earlier row
// of this forward).
struct ForwardInput {
  absl::Span<const ForwardRow> rows;
  absl::Span<const SequenceKv> seqs;
  absl::Span<const int32_t> logit_rows;  // rows whose logits are returned, in order
};

class Transformer {
 public:
  // Reads config.json and the safetensors of `dir`; with expert parallelism loads only
  // this rank's experts. `name` prefixes collective tags ("target", "draft").
  static absl::StatusOr<std::unique_ptr<Transformer>> Load(const std::string& dir,
                                                           const std::string& name,
                                                           ExpertGroup group);
  static std::unique_ptr<Transformer> Create(ModelConfig config, ModelWeights weights,
                                             const std::string& name, ExpertGroup group);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelConfig& config() const { return config_; }
  // The block layout of this model's KV for `tokens_per_block`.
  kv::BlockLayout Layout(int tokens_per_block) const;

  // Runs the forward, reading and writing K/V in `pool`. Returns the logits,
  // [logit_rows.size(), vocab] in `arena`. Inputs are trusted (validated by the
  // caller): tokens in the vocabulary, block tables covering every position. Only a
  // Communicator failure is an error. Makes collectives_per_forward() collectives.
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const KvPoolView& pool,
                                       Arena& arena, ThreadPool* threads) const;

  int collectives_per_forward() const;

 private:
  Transformer(ModelConfig config, ModelWeights weights, const std::string& name, ExpertGroup group);

  void Attention(int layer, const ForwardInput& input, const KvPoolView& pool, float* qkv,
                 const float* cos, const float* sin, float* out, Arena& arena,
                 ThreadPool* threads) const;

  const ModelConfig config_;
  const ModelWeights weights_;
  const MoeBlock moe_;
  std::vector<double> inv_freq_;  // RoPE, head_dim / 2
  const float eps_;               // rms_norm_eps
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_TRANSFORMER_H_

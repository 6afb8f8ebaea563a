// The multi-token-prediction (MTP) module of a DeepSeek-V3-family checkpoint, as the
// CPU engine runs it: the layer at index num_hidden_layers (`model.layers.{L}.*`),
//
//   x = eh_proj([enorm(embed(next token)); hnorm(previous hidden)])
//   h = one decoder layer (MLA + MoE, the target's kinds) over x, with its own KV
//   logits = shared_head.head(shared_head.norm(h))
//
// where `embed_tokens` and `shared_head.head` fall back to the target's embedding and
// LM head when the checkpoint omits them. A row takes a token and the hidden state of
// the position before it (the target's, or the module's own `h` when it drafts on its
// own outputs) and predicts the token after it; its K/V (one layer of the target's
// cache kind, MLA's latent vector) sits in the draft pool at the row's position
// (mtp_drafter.h says which). Only the first MTP layer is used
// (num_nextn_predict_layers >= 1).
//
// Collectives: one Forward makes collectives_per_forward() (the layer's MoE exchange
// under expert parallelism), whatever its rows.
//
// Immutable after loading; Forward is thread-compatible (the engine thread).
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_MTP_MODULE_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_MTP_MODULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/moe.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

class MtpModule {
 public:
  // Reads the MTP layer of the model in `dir` (this rank's experts only). Refuses a
  // model without one (num_nextn_predict_layers 0) or outside the DeepSeek-V3 family.
  static absl::StatusOr<std::unique_ptr<MtpModule>> Load(const std::string& dir,
                                                         ExpertGroup group);

  // The block layout of the module's KV (one layer) for `tokens_per_block`.
  static absl::StatusOr<kv::BlockLayout> BlockLayout(const std::string& dir,
                                                     int tokens_per_block);

  // The one-layer model under the module (its config, Layout, CopyKv, NewSpecBuffer).
  const ForwardModel& layer() const { return *layer_; }
  int hidden_size() const { return layer_->config().hidden_size; }
  int vocab_size() const { return layer_->config().vocab_size; }
  int collectives_per_forward() const { return layer_->collectives_per_forward(); }

  // Runs the module over `input` (each row's token is embedded; its position is where
  // its K/V goes), with `previous_hidden` [rows, hidden]. Writes the
  // rows' output hidden states to `hidden_out` [rows, hidden] and returns the logits
  // of input.logit_rows (ForwardModel::Forward's lifetime rules).
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const float* previous_hidden,
                                       float* hidden_out, const KvPoolView& pool, Arena& arena,
                                       ThreadPool* threads) const;

 private:
  MtpModule() = default;

  float eps_ = 0;
  std::vector<float> embedding_;  // [vocab, hidden]
  std::vector<float> enorm_;
  std::vector<float> hnorm_;
  PackedMatrix eh_proj_;  // [hidden, 2 * hidden]
  std::unique_ptr<Transformer> layer_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_MTP_MODULE_H_

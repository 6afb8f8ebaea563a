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

// The target's config of the model in `dir`, checked to be of the DeepSeek-V3 family
// with an MTP layer (num_nextn_predict_layers >= 1); InvalidArgument naming the field.
absl::StatusOr<ModelConfig> MtpTargetConfig(const std::string& dir);

// The MTP layer as a model of its own: the target's kinds, one layer, MoE where layer
// index target.num_layers would be.
ModelConfig MtpLayerConfig(const ModelConfig& target);

// What the MTP drafter (mtp_drafter.h) runs: the module on some device. The CPU
// engine's is MtpModule below; the CUDA engine's lives in runtime/cuda/engine/.
class MtpModel {
 public:
  virtual ~MtpModel() = default;
  // The one-layer model under the module (its config, Layout, CopyKv, NewSpecBuffer).
  virtual const ForwardModel& layer() const = 0;
  virtual int hidden_size() const = 0;
  virtual int vocab_size() const = 0;
  virtual int collectives_per_forward() const = 0;
  // Runs the module over `input` (each row's token is embedded; its position is where
  // its K/V goes), with `previous_hidden` [rows, hidden] on the host. Writes the rows'
  // output hidden states to `hidden_out` [rows, hidden] on the host and returns the
  // logits of input.logit_rows (ForwardModel::Forward's lifetime rules).
  virtual absl::StatusOr<const float*> Forward(const ForwardInput& input,
                                               const float* previous_hidden, float* hidden_out,
                                               const KvPoolView& pool, Arena& arena,
                                               ThreadPool* threads) const = 0;
};

class MtpModule final : public MtpModel {
 public:
  // Reads the MTP layer of the model in `dir` (this rank's experts only). Refuses a
  // model without one (num_nextn_predict_layers 0) or outside the DeepSeek-V3 family.
  static absl::StatusOr<std::unique_ptr<MtpModule>> Load(const std::string& dir,
                                                         ExpertGroup group);

  // The block layout of the module's KV (one layer) for `tokens_per_block`.
  static absl::StatusOr<kv::BlockLayout> BlockLayout(const std::string& dir,
                                                     int tokens_per_block);

  // MtpModel.
  const ForwardModel& layer() const override { return *layer_; }
  int hidden_size() const override { return layer_->config().hidden_size; }
  int vocab_size() const override { return layer_->config().vocab_size; }
  int collectives_per_forward() const override { return layer_->collectives_per_forward(); }
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const float* previous_hidden,
                                       float* hidden_out, const KvPoolView& pool, Arena& arena,
                                       ThreadPool* threads) const override;

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

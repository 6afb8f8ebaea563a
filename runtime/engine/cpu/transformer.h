// The CPU ForwardModel (forward_model.h): the forward of one decoder-only transformer
// over a batch of token rows from many sequences (context chunks, generation tokens,
// verify tokens, draft proposals).
//
// Per layer: RMSNorm -> fused QKV (+bias) -> [q/k norm] -> RoPE -> K/V written in place
// into each sequence's pool blocks (or spec buffer) -> paged causal attention per row
// (or, for the DeepSeek-V3 family, multi-head latent attention over a latent cache:
// mla_attention.h) -> O projection + residual -> RMSNorm -> SwiGLU MLP or MoE block
// (plus shared experts) + residual. Then the final norm and the LM head for the rows
// whose logits are asked for. All scratch comes from the caller's Arena.
//
// Batch invariance: every row's logits are bitwise the same whatever other rows and
// sequences share the forward and however many expert-parallel ranks there are.
//
// Thread-compatible: owned and used by the engine thread.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_TRANSFORMER_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kvcache/block_layout.h"
#include "runtime/engine/cpu/arena.h"
#include "runtime/engine/cpu/forward_model.h"
#include "runtime/engine/cpu/mla_attention.h"
#include "runtime/engine/cpu/moe.h"
#include "runtime/engine/cpu/paged_attention.h"
#include "runtime/engine/cpu/parallel.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/model_config.h"

namespace lockstep::engine {

class Transformer final : public ForwardModel {
 public:
  // Reads config.json and the safetensors of `dir`; with expert parallelism loads only
  // this rank's experts (placed by `layout`; empty: contiguous ranges). `name` prefixes
  // collective tags ("target", "draft").
  static absl::StatusOr<std::unique_ptr<Transformer>> Load(const std::string& dir,
                                                           const std::string& name,
                                                           ExpertGroup group,
                                                           const ExpertLayout& layout = {});
  static std::unique_ptr<Transformer> Create(ModelConfig config, ModelWeights weights,
                                             const std::string& name, ExpertGroup group);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  // ForwardModel (forward_model.h).
  const ModelConfig& config() const override { return config_; }
  kv::BlockLayout Layout(int tokens_per_block) const override;
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const KvPoolView& pool,
                                       Arena& arena, ThreadPool* threads) const override;
  void CopyKv(const KvPoolView& pool, const SequenceKv& from, const SequenceKv& to, int64_t begin,
              int64_t end) const override;
  int collectives_per_forward() const override;

  // Taps the MoE router logits of the forwards that follow (moe.h; a test hook).
  void set_router_tap(RouterTap tap) { moe_.set_router_tap(std::move(tap)); }
  // Counts the MoE routing of the forwards that follow into `load` (moe.h; null: none).
  void set_expert_load(ExpertLoad* load) { moe_.set_expert_load(load); }
  // As set_expert_load, keeping `load` for the transformer's lifetime (the engine's).
  void OwnExpertLoad(std::unique_ptr<ExpertLoad> load) {
    owned_load_ = std::move(load);
    moe_.set_expert_load(owned_load_.get());
  }
  // The owned ExpertLoad (its Latest() may be read from any thread); null: none.
  const ExpertLoad* expert_load() const { return owned_load_.get(); }
  // Rebalances at the ends of the expert-load windows (moe.h; needs an ExpertLoad),
  // keeping `rebalancer` for the transformer's lifetime.
  void OwnRebalancer(std::unique_ptr<ExpertRebalancer> rebalancer) {
    owned_rebalancer_ = std::move(rebalancer);
    moe_.set_rebalancer(owned_rebalancer_.get());
  }
  // The loaded MoE weights per layer (null for dense layers), valid while the
  // transformer lives (they are not owned): a rebalancer's starting point.
  LayerMoeWeights LoadedMoeWeights() const {
    LayerMoeWeights out;
    for (const LayerWeights& layer : weights_.layers) {
      out.push_back(layer.is_moe ? std::shared_ptr<const MoeWeights>(std::shared_ptr<void>(),
                                                                     &layer.moe)
                                 : nullptr);
    }
    return out;
  }
  // The MLA form of the forwards that follow (default: absorbed; a test hook).
  void set_mla_form(MlaForm form) { mla_form_ = form; }

 private:
  Transformer(ModelConfig config, ModelWeights weights, const std::string& name, ExpertGroup group);

  void Attention(int layer, const ForwardInput& input, const KvPoolView& pool, float* qkv,
                 const float* cos, const float* sin, float* out, Arena& arena,
                 ThreadPool* threads) const;

  const ModelConfig config_;
  const ModelWeights weights_;
  MoeBlock moe_;
  std::unique_ptr<ExpertLoad> owned_load_;  // OwnExpertLoad's; null: none
  std::unique_ptr<ExpertRebalancer> owned_rebalancer_;  // destroyed before owned_load_
  MlaAttention mla_;
  MlaForm mla_form_ = MlaForm::kAbsorbed;
  std::vector<double> inv_freq_;  // RoPE (YaRN-scaled where configured), rope_dim / 2
  float rope_magnitude_;          // cos and sin are multiplied by it (YaRN)
  const float eps_;               // rms_norm_eps
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_TRANSFORMER_H_

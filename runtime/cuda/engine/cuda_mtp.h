// The MTP module (runtime/engine/cpu/mtp_module.h) on the CUDA engine: the checkpoint's
// MTP layer as a one-layer CudaTransformer (CudaTransformer::LoadMtp: the prologue
// enorm/hnorm/eh_proj, one MLA + MoE decoder layer, shared_head's norm and head) under
// the CPU engine's MtpDrafter, so drafting, the draft KV contract and acceptance are
// the CPU engine's. Its KV is the draft pool's (one latent layer, Layout), its spec
// buffers device memory; its decode passes replay the layer's own CUDA graphs
// (CudaTransformer::CaptureGraphs over the draft pool).
//
// Thread-compatible: the engine thread calls Forward.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_MTP_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_MTP_H_

#include <memory>

#include "runtime/cuda/engine/cuda_transformer.h"
#include "runtime/engine/cpu/mtp_module.h"

namespace lockstep::cuda {

class CudaMtp final : public engine::MtpModel {
 public:
  // `layer`: CudaTransformer::LoadMtp's model.
  explicit CudaMtp(std::unique_ptr<CudaTransformer> layer) : layer_(std::move(layer)) {}

  const engine::ForwardModel& layer() const override { return *layer_; }
  int hidden_size() const override { return layer_->config().hidden_size; }
  int vocab_size() const override { return layer_->config().vocab_size; }
  int collectives_per_forward() const override { return layer_->collectives_per_forward(); }
  absl::StatusOr<const float*> Forward(const engine::ForwardInput& input,
                                       const float* previous_hidden, float* hidden_out,
                                       const engine::KvPoolView& pool, engine::Arena& arena,
                                       engine::ThreadPool* threads) const override {
    engine::ForwardInput in = input;
    in.input_hidden = previous_hidden;
    in.hidden_out = hidden_out;
    return layer_->Forward(in, pool, arena, threads);
  }

  CudaTransformer* model() const { return layer_.get(); }

 private:
  const std::unique_ptr<CudaTransformer> layer_;
};

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_CUDA_MTP_H_

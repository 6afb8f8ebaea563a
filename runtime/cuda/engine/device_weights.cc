#include "runtime/cuda/engine/device_weights.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/engine/weight_convert.h"
#include "runtime/engine/cpu/rope.h"

namespace lockstep::cuda {
namespace {

class Uploader {
 public:
  Uploader(const engine::SafetensorsModel& tensors, DeviceWeights& out, int device)
      : tensors_(tensors), out_(out), device_(device) {}

  // Uploads `bytes` from the host; `what` names it in errors.
  absl::StatusOr<const void*> Bytes(const void* host, size_t bytes, const std::string& what) {
    ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(device_, bytes, what));
    RETURN_IF_ERROR(CudaStatus(cudaMemcpy(buffer.get(), host, bytes, cudaMemcpyHostToDevice),
                               absl::StrCat("copying ", what, " to the device")));
    const void* data = buffer.get();
    out_.bytes += bytes;
    out_.storage.push_back(std::move(buffer));
    return data;
  }

  // Reads, converts and uploads one weight; null for a weight without parts.
  absl::StatusOr<const void*> Weight(const engine::WeightSource& w) {
    if (w.parts.empty()) return nullptr;
    ASSIGN_OR_RETURN(std::vector<float> values, engine::ReadWeight(tensors_, w));
    const std::vector<std::byte> elements = ToElements(values, out_.element_bytes);
    return Bytes(elements.data(), elements.size(),
                 absl::StrCat("tensor ", DescribeWeight(w, out_.element_bytes)));
  }

  // Reads and uploads one vector as f32 whatever the element type; null without parts.
  absl::StatusOr<const float*> F32(const engine::WeightSource& w) {
    if (w.parts.empty()) return nullptr;
    ASSIGN_OR_RETURN(std::vector<float> values, engine::ReadWeight(tensors_, w));
    ASSIGN_OR_RETURN(const void* data, Bytes(values.data(), values.size() * sizeof(float),
                                             absl::StrCat("tensor ", DescribeWeight(w, 4))));
    return static_cast<const float*>(data);
  }

  // The device array of `pointers` (the grouped GEMM reads it).
  absl::StatusOr<const void* const*> Pointers(const std::vector<const void*>& pointers,
                                              const std::string& what) {
    ASSIGN_OR_RETURN(const void* data,
                     Bytes(pointers.data(), pointers.size() * sizeof(void*), what));
    return static_cast<const void* const*>(data);
  }

 private:
  const engine::SafetensorsModel& tensors_;
  DeviceWeights& out_;
  const int device_;
};

}  // namespace

absl::StatusOr<DeviceWeights> UploadWeights(const engine::SafetensorsModel& tensors,
                                            const engine::ModelConfig& config,
                                            const engine::ModelPlan& plan, int element_bytes,
                                            int device, const MtpSources* mtp) {
  DeviceWeights w;
  w.element_bytes = element_bytes;
  Uploader up(tensors, w, device);
  ASSIGN_OR_RETURN(w.embedding, up.Weight(plan.embedding));
  for (const engine::LayerSource& s : plan.layers) {
    DeviceLayer layer;
    ASSIGN_OR_RETURN(layer.attn_norm, up.Weight(s.attn_norm));
    ASSIGN_OR_RETURN(layer.qkv, up.Weight(s.qkv));
    ASSIGN_OR_RETURN(layer.qkv_bias, up.Weight(s.qkv_bias));
    ASSIGN_OR_RETURN(layer.q_norm, up.Weight(s.q_norm));
    ASSIGN_OR_RETURN(layer.k_norm, up.Weight(s.k_norm));
    ASSIGN_OR_RETURN(layer.o, up.Weight(s.o));
    layer.mla = s.mla;
    if (s.mla) {
      const engine::MlaSource& m = s.mla_parts;
      ASSIGN_OR_RETURN(layer.q_a, up.Weight(m.q_a));
      ASSIGN_OR_RETURN(layer.q_a_norm, up.Weight(m.q_a_norm));
      ASSIGN_OR_RETURN(layer.q_b, up.Weight(m.q_b));
      ASSIGN_OR_RETURN(layer.q, up.Weight(m.q));
      ASSIGN_OR_RETURN(layer.kv_a, up.Weight(m.kv_a));
      ASSIGN_OR_RETURN(layer.kv_a_norm, up.Weight(m.kv_a_norm));
      ASSIGN_OR_RETURN(layer.kv_b, up.Weight(m.kv_b));
    }
    ASSIGN_OR_RETURN(layer.mlp_norm, up.Weight(s.mlp_norm));
    layer.is_moe = s.is_moe;
    if (!s.is_moe) {
      ASSIGN_OR_RETURN(layer.gate_up, up.Weight(s.mlp.gate_up));
      ASSIGN_OR_RETURN(layer.down, up.Weight(s.mlp.down));
    } else {
      ASSIGN_OR_RETURN(layer.router, up.Weight(s.router));
      ASSIGN_OR_RETURN(layer.router_bias, up.F32(s.router_bias));
      layer.shared_width = s.shared.width;
      ASSIGN_OR_RETURN(layer.shared_gate_up, up.Weight(s.shared.gate_up));
      ASSIGN_OR_RETURN(layer.shared_down, up.Weight(s.shared.down));
      layer.local = s.local;
      std::vector<const void*> gate_up, down;
      for (const engine::SwiGluSource& expert : s.experts) {
        ASSIGN_OR_RETURN(const void* g, up.Weight(expert.gate_up));
        ASSIGN_OR_RETURN(const void* d, up.Weight(expert.down));
        gate_up.push_back(g);
        down.push_back(d);
      }
      ASSIGN_OR_RETURN(layer.expert_gate_up,
                       up.Pointers(gate_up, absl::StrCat(s.router.label, " gate_up table")));
      ASSIGN_OR_RETURN(layer.expert_down,
                       up.Pointers(down, absl::StrCat(s.router.label, " down table")));
    }
    w.layers.push_back(layer);
  }
  ASSIGN_OR_RETURN(w.final_norm, up.Weight(plan.final_norm));
  if (plan.tied_lm_head) {
    w.lm_head = w.embedding;
  } else {
    ASSIGN_OR_RETURN(w.lm_head, up.Weight(plan.lm_head));
  }
  if (mtp != nullptr) {
    ASSIGN_OR_RETURN(w.mtp.enorm, up.Weight(mtp->enorm));
    ASSIGN_OR_RETURN(w.mtp.hnorm, up.Weight(mtp->hnorm));
    ASSIGN_OR_RETURN(w.mtp.eh_proj, up.Weight(mtp->eh_proj));
  }
  // RoPE's angles and YaRN's magnitude, as the CPU transformer computes them.
  const std::vector<double> inv_freq = engine::RopeInverseFrequencies(config);
  w.rope_magnitude = engine::RopeMagnitude(config);
  ASSIGN_OR_RETURN(const void* angles,
                   up.Bytes(inv_freq.data(), inv_freq.size() * sizeof(double), "RoPE angles"));
  w.inv_freq = static_cast<const double*>(angles);
  return w;
}

}  // namespace lockstep::cuda

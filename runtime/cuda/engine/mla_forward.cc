#include "runtime/cuda/engine/mla_forward.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/elementwise_kernels.h"
#include "runtime/cuda/kernels/kernel_ops.h"
#include "runtime/cuda/kernels/mla_kernels.h"
#include "runtime/cuda/kernels/mla_projections.h"

namespace lockstep::cuda {

template <typename T>
absl::Status EnqueueMla(const ForwardContext& c, int layer, const T* x, T* out) {
  const engine::ModelConfig& config = *c.config;
  const engine::MlaDims& d = config.mla_dims;
  const ScratchLayout& l = *c.layout;
  const DeviceLayer& w = c.weights->layers[layer];
  const int rows = c.shape.rows;
  const int hidden = config.hidden_size;
  const int heads = config.num_heads;
  const int qk = d.qk_head_dim();
  const int latent = d.latent_dim();
  const float eps = static_cast<float>(config.rms_norm_eps);
  const kernels::MlaShape shape{heads,         d.qk_nope_head_dim, d.qk_rope_head_dim,
                                d.kv_lora_rank, d.v_head_dim,       config.cache_head_dim()};
  std::byte* s = c.scratch;
  const std::byte* input = s + l.input;
  const auto* positions = reinterpret_cast<const int32_t*>(input + c.offsets.positions);
  const auto* kv_seqs = reinterpret_cast<const int32_t*>(input + c.offsets.kv_seqs);
  T* q = reinterpret_cast<T*>(s + l.mla_q);
  T* kv = reinterpret_cast<T*>(s + l.mla_kv);
  float* q_lat = reinterpret_cast<float*>(s + l.mla_q_lat);
  T* acc = reinterpret_cast<T*>(s + l.mla_acc);  // f32-sized: T fits
  const std::string where = absl::StrCat("layer ", layer, " MLA");
  auto check = [&](cudaError_t error, const char* what) {
    return CudaStatus(error, absl::StrCat(where, ": ", what));
  };
  auto gemm = [&](const T* a, const void* weight, int n, int k, T* y) -> absl::Status {
    if (rows == 0) return absl::OkStatus();
    return TimedSegment(c, ForwardTimer::Segment::kGemm,
                        [&] { return c.gemm->Gemm(a, rows, static_cast<const T*>(weight), n, k, y); });
  };
  auto weight = [](const void* p) { return static_cast<const T*>(p); };

  // The query [rows][heads * qk].
  if (d.q_lora_rank > 0) {
    T* q_low = reinterpret_cast<T*>(s + l.mla_q_low);
    RETURN_IF_ERROR(gemm(x, w.q_a, d.q_lora_rank, hidden, q_low));
    RETURN_IF_ERROR(check(kernels::LaunchAddRmsNorm(q_low, nullptr, weight(w.q_a_norm), rows,
                                                    d.q_lora_rank, eps, q_low, c.stream),
                          "q_a norm"));
    RETURN_IF_ERROR(gemm(q_low, w.q_b, heads * qk, d.q_lora_rank, q));
  } else {
    RETURN_IF_ERROR(gemm(x, w.q, heads * qk, hidden, q));
  }
  // The latent vector [rows][latent]: c normalised, k_pe and q_pe rotated.
  RETURN_IF_ERROR(gemm(x, w.kv_a, latent, hidden, kv));
  RETURN_IF_ERROR(check(kernels::LaunchHeadRmsNorm(kv, latent, rows, 1, d.kv_lora_rank,
                                                   weight(w.kv_a_norm), eps, c.stream),
                        "kv_a norm"));
  const float magnitude = c.weights->rope_magnitude;
  RETURN_IF_ERROR(check(kernels::LaunchRopeInterleaved(kv + d.kv_lora_rank, latent, rows, 1,
                                                       latent, d.qk_rope_head_dim, positions,
                                                       c.weights->inv_freq, magnitude, c.stream),
                        "k_pe rope"));
  RETURN_IF_ERROR(check(kernels::LaunchRopeInterleaved(q + d.qk_nope_head_dim, heads * qk, rows,
                                                       heads, qk, d.qk_rope_head_dim, positions,
                                                       c.weights->inv_freq, magnitude, c.stream),
                        "q_pe rope"));
  // The cache: the K plane gets the first half of the latent vector, the V plane the rest
  // (latent is even: PlanScratch refuses an odd one).
  RETURN_IF_ERROR(kernels::WriteKv(c.kv, layer, kv, kv + shape.half, latent, kv_seqs, positions,
                                   rows, c.stream));
  // The absorbed projections are GEMMs over the heads (mla_projections.h); the attention
  // between them sums in f32 and rounds its output to T once.
  auto annotate = [&](absl::Status s) {
    return s.ok() ? s : absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
  };
  RETURN_IF_ERROR(TimedSegment(c, ForwardTimer::Segment::kGemm, [&] {
    return annotate(kernels::MlaAbsorbQuery(*c.gemm, q, heads * qk, rows, shape, weight(w.kv_b),
                                            q_lat, c.stream));
  }));
  RETURN_IF_ERROR(TimedSegment(c, ForwardTimer::Segment::kAttention, [&] {
    return check(
        kernels::LaunchMlaAttention(c.kv, layer, q_lat, shape, kv_seqs, positions, rows,
                                    static_cast<float>(config.softmax_scale()), acc, c.stream),
        "attention");
  }));
  return TimedSegment(c, ForwardTimer::Segment::kGemm, [&] {
    return annotate(
        kernels::MlaApplyUv(*c.gemm, acc, rows, shape, weight(w.kv_b), out, heads * d.v_head_dim));
  });
}

template absl::Status EnqueueMla<kernels::Bf16>(const ForwardContext&, int, const kernels::Bf16*,
                                                kernels::Bf16*);
template absl::Status EnqueueMla<float>(const ForwardContext&, int, const float*, float*);

}  // namespace lockstep::cuda

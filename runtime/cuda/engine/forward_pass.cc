#include "runtime/cuda/engine/forward_pass.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/engine/mla_forward.h"
#include "runtime/cuda/engine/moe_forward.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/decode_attention_kernel.h"
#include "runtime/cuda/kernels/elementwise_kernels.h"
#include "runtime/cuda/kernels/kernel_ops.h"
#include "runtime/cuda/kernels/moe_kernels.h"
#include "runtime/cuda/kernels/prefill_attention_kernel.h"

namespace lockstep::cuda {
namespace {

using kernels::Bf16;

template <typename T>
const T* W(const void* p) {
  return static_cast<const T*>(p);
}

// The attention of layer `layer` over the step's K/V: decode rows, then prefill tiles.
template <typename T>
absl::Status AttentionKernels(const ForwardContext& c, int layer, const T* qkv, int64_t qkv_width,
                              T* out) {
  const engine::ModelConfig& config = *c.config;
  const std::byte* input = c.scratch + c.layout->input;
  const float scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
  if (c.shape.decode_rows > 0) {
    kernels::DecodeAttentionArgs args;
    args.kv = c.kv;
    args.layer = layer;
    args.q = qkv;
    args.q_row_stride = qkv_width;
    args.num_heads = config.num_heads;
    args.scale = scale;
    args.rows = reinterpret_cast<const kernels::DecodeRowDesc*>(input + c.offsets.decode_rows);
    args.items = reinterpret_cast<const kernels::DecodeWorkItem*>(input + c.offsets.decode_items);
    args.num_rows = c.shape.decode_rows;
    args.num_items = c.shape.decode_items;
    args.scratch = reinterpret_cast<float*>(c.scratch + c.layout->decode_scratch);
    args.out = out;
    args.out_row_stride = config.q_dim();
    RETURN_IF_ERROR(kernels::DecodeAttention(args, c.stream));
  }
  if (c.shape.prefill_tiles > 0) {
    kernels::PrefillAttentionArgs args;
    args.kv = c.kv;
    args.layer = layer;
    args.q = qkv;
    args.q_row_stride = qkv_width;
    args.num_heads = config.num_heads;
    args.scale = scale;
    args.tiles = reinterpret_cast<const kernels::PrefillTileDesc*>(input + c.offsets.prefill_tiles);
    args.num_tiles = c.shape.prefill_tiles;
    args.out = out;
    args.out_row_stride = config.q_dim();
    RETURN_IF_ERROR(kernels::PrefillAttention(args, c.stream));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Attention(const ForwardContext& c, int layer, const T* qkv, int64_t qkv_width,
                       T* out) {
  return TimedSegment(c, ForwardTimer::Segment::kAttention,
                      [&] { return AttentionKernels<T>(c, layer, qkv, qkv_width, out); });
}

// y = x · wᵀ over `m` rows (nothing for none).
template <typename T, typename Out>
absl::Status Gemm(const ForwardContext& c, const T* x, int64_t m, const void* w, int64_t n,
                  int64_t k, Out* y) {
  if (m == 0) return absl::OkStatus();
  return TimedSegment(c, ForwardTimer::Segment::kGemm,
                      [&] { return c.gemm->Gemm(x, m, W<T>(w), n, k, y); });
}

// Plain attention of layer `i`: the fused QKV projection (+ bias), q/k norm, RoPE, the
// K/V write and the attention kernels; out[rows][q_dim].
template <typename T>
absl::Status AttentionLayer(const ForwardContext& step, int i, const T* normed, T* qkv, T* attn) {
  const ForwardContext& c = step;
  const engine::ModelConfig& config = *c.config;
  const DeviceLayer& layer = c.weights->layers[i];
  const DeviceWeights& w = *c.weights;
  const int rows = c.shape.rows;
  const int hidden = config.hidden_size;
  const int q_dim = config.q_dim();
  const int kv_dim = config.kv_dim();
  const int qkv_width = q_dim + 2 * kv_dim;
  const float eps = static_cast<float>(config.rms_norm_eps);
  const std::byte* input = c.scratch + c.layout->input;
  const auto* positions = reinterpret_cast<const int32_t*>(input + c.offsets.positions);
  const auto* kv_seqs = reinterpret_cast<const int32_t*>(input + c.offsets.kv_seqs);
  RETURN_IF_ERROR(Gemm<T>(c, normed, rows, layer.qkv, qkv_width, hidden, qkv));
  if (layer.qkv_bias != nullptr) {
    RETURN_IF_ERROR(CudaStatus(
        kernels::LaunchAddBias(qkv, qkv_width, rows, qkv_width, W<T>(layer.qkv_bias), c.stream),
        absl::StrCat("layer ", i, " qkv bias")));
  }
  if (layer.q_norm != nullptr) {
    RETURN_IF_ERROR(
        CudaStatus(kernels::LaunchHeadRmsNorm(qkv, qkv_width, rows, config.num_heads,
                                              config.head_dim, W<T>(layer.q_norm), eps, c.stream),
                   absl::StrCat("layer ", i, " q norm")));
    RETURN_IF_ERROR(
        CudaStatus(kernels::LaunchHeadRmsNorm(qkv + q_dim, qkv_width, rows, config.num_kv_heads,
                                              config.head_dim, W<T>(layer.k_norm), eps, c.stream),
                   absl::StrCat("layer ", i, " k norm")));
  }
  RETURN_IF_ERROR(
      CudaStatus(kernels::LaunchRope(qkv, qkv_width, rows, config.num_heads, config.head_dim,
                                     positions, w.inv_freq, c.stream),
                 absl::StrCat("layer ", i, " q rope")));
  RETURN_IF_ERROR(
      CudaStatus(kernels::LaunchRope(qkv + q_dim, qkv_width, rows, config.num_kv_heads,
                                     config.head_dim, positions, w.inv_freq, c.stream),
                 absl::StrCat("layer ", i, " k rope")));
  RETURN_IF_ERROR(kernels::WriteKv(step.kv, i, qkv + q_dim, qkv + q_dim + kv_dim, qkv_width,
                                   kv_seqs, positions, rows, c.stream));
  RETURN_IF_ERROR(Attention<T>(step, i, qkv, qkv_width, attn));
  return absl::OkStatus();
}

// An MTP layer's input (runtime/engine/cpu/mtp_module.h), the CPU module's order:
// h = eh_proj([enorm(embedding(token)); hnorm(previous hidden)]) over the step's rows,
// the previous hidden states read from the scratch's hidden_in.
template <typename T>
absl::Status EnqueueMtpPrologue(const ForwardContext& c, const int32_t* tokens, T* h) {
  const engine::ModelConfig& config = *c.config;
  const ScratchLayout& l = *c.layout;
  const DeviceWeights& w = *c.weights;
  const int rows = c.shape.rows;
  const int hidden = config.hidden_size;
  const float eps = static_cast<float>(config.rms_norm_eps);
  T* embedded = reinterpret_cast<T*>(c.scratch + l.normed);
  T* previous = reinterpret_cast<T*>(c.scratch + l.delta);
  T* both = reinterpret_cast<T*>(c.scratch + l.mtp_both);
  RETURN_IF_ERROR(CudaStatus(
      kernels::LaunchMoeGather(W<T>(w.embedding), hidden, tokens, rows, 1, embedded, c.stream),
      "MTP embedding lookup"));
  RETURN_IF_ERROR(CudaStatus(kernels::LaunchAddRmsNorm(embedded, nullptr, W<T>(w.mtp.enorm), rows,
                                                       hidden, eps, embedded, c.stream),
                             "MTP enorm"));
  RETURN_IF_ERROR(CudaStatus(
      kernels::LaunchAddRmsNorm(reinterpret_cast<const T*>(c.scratch + l.hidden_in), nullptr,
                                W<T>(w.mtp.hnorm), rows, hidden, eps, previous, c.stream),
      "MTP hnorm"));
  const size_t row_bytes = static_cast<size_t>(hidden) * sizeof(T);
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy2DAsync(both, 2 * row_bytes, embedded, row_bytes, row_bytes,
                                               rows, cudaMemcpyDeviceToDevice, c.stream),
                             "MTP concatenation"));
  RETURN_IF_ERROR(CudaStatus(cudaMemcpy2DAsync(both + hidden, 2 * row_bytes, previous, row_bytes,
                                               row_bytes, rows, cudaMemcpyDeviceToDevice, c.stream),
                             "MTP concatenation"));
  return Gemm<T>(c, both, rows, w.mtp.eh_proj, hidden, 2 * hidden, h);
}

template <typename T>
absl::Status EnqueueLayers(const ForwardContext& c) {
  const engine::ModelConfig& config = *c.config;
  const ScratchLayout& l = *c.layout;
  const DeviceWeights& w = *c.weights;
  const int rows = c.shape.rows;
  const int hidden = config.hidden_size;
  const int q_dim = config.q_dim();
  const int attn_width = config.mla ? config.num_heads * config.mla_dims.v_head_dim : q_dim;
  const int width = config.intermediate_size;
  const float eps = static_cast<float>(config.rms_norm_eps);
  std::byte* s = c.scratch;
  const std::byte* input = s + l.input;
  const auto* tokens = reinterpret_cast<const int32_t*>(input + c.offsets.tokens);
  const auto* logit_rows = reinterpret_cast<const int32_t*>(input + c.offsets.logit_rows);
  T* h = reinterpret_cast<T*>(s + l.h);
  T* normed = reinterpret_cast<T*>(s + l.normed);
  T* qkv = reinterpret_cast<T*>(s + l.qkv);
  T* attn = reinterpret_cast<T*>(s + l.attn);
  T* delta = reinterpret_cast<T*>(s + l.delta);
  T* gate_up = reinterpret_cast<T*>(s + l.gate_up);
  T* act = reinterpret_cast<T*>(s + l.act);

  ForwardContext step = c;  // the pool with this step's tables
  step.kv.block_table = reinterpret_cast<const int32_t*>(input + c.offsets.block_table);
  step.kv.table_stride = c.shape.table_stride;
  step.kv.spec_base = reinterpret_cast<const int32_t*>(input + c.offsets.spec_base);
  step.kv.spec = reinterpret_cast<void* const*>(input + c.offsets.spec_ptrs);
  step.kv.spec_tokens = c.shape.spec_tokens;

  if (w.mtp.eh_proj == nullptr) {
    RETURN_IF_ERROR(CudaStatus(
        kernels::LaunchMoeGather(W<T>(w.embedding), hidden, tokens, rows, 1, h, c.stream),
        "embedding lookup"));
  } else if (rows > 0) {
    RETURN_IF_ERROR(EnqueueMtpPrologue<T>(c, tokens, h));
  }
  for (int i = 0; i < config.num_layers; ++i) {
    const DeviceLayer& layer = w.layers[i];
    // h += delta of the layer before (none before the first); normed = RMSNorm(h).
    RETURN_IF_ERROR(CudaStatus(
        kernels::LaunchAddRmsNorm(i == 0 ? h : delta, i == 0 ? nullptr : h, W<T>(layer.attn_norm),
                                  rows, hidden, eps, normed, c.stream),
        absl::StrCat("layer ", i, " input norm")));
    if (layer.mla) {
      RETURN_IF_ERROR(EnqueueMla<T>(step, i, normed, attn));
    } else {
      RETURN_IF_ERROR(AttentionLayer<T>(step, i, normed, qkv, attn));
    }
    RETURN_IF_ERROR(Gemm<T>(c, attn, rows, layer.o, hidden, attn_width, delta));
    RETURN_IF_ERROR(CudaStatus(kernels::LaunchAddRmsNorm(delta, h, W<T>(layer.mlp_norm), rows,
                                                         hidden, eps, normed, c.stream),
                               absl::StrCat("layer ", i, " MLP norm")));
    if (layer.is_moe) {
      RETURN_IF_ERROR(EnqueueMoe<T>(c, i, normed, delta));
      if (layer.shared_width > 0) {  // every rank, every row: added after the routed experts
        const int sw = layer.shared_width;
        T* shared = reinterpret_cast<T*>(s + l.shared_out);
        RETURN_IF_ERROR(Gemm<T>(c, normed, rows, layer.shared_gate_up, 2 * sw, hidden, gate_up));
        RETURN_IF_ERROR(CudaStatus(
            kernels::LaunchSiluMul(gate_up, gate_up + sw, 2 * sw, rows, sw, act, sw, c.stream),
            absl::StrCat("layer ", i, " shared experts' SiLU")));
        RETURN_IF_ERROR(Gemm<T>(c, act, rows, layer.shared_down, hidden, sw, shared));
        RETURN_IF_ERROR(
            CudaStatus(kernels::LaunchAdd(delta, shared, static_cast<int64_t>(rows) * hidden,
                                          c.stream),
                       absl::StrCat("layer ", i, " shared experts' sum")));
      }
      continue;
    }
    RETURN_IF_ERROR(Gemm<T>(c, normed, rows, layer.gate_up, 2 * width, hidden, gate_up));
    RETURN_IF_ERROR(CudaStatus(kernels::LaunchSiluMul(gate_up, gate_up + width, 2 * width, rows,
                                                      width, act, width, c.stream),
                               absl::StrCat("layer ", i, " SiLU")));
    RETURN_IF_ERROR(Gemm<T>(c, act, rows, layer.down, hidden, width, delta));
  }
  // The final norm (h += the last layer's delta), the logit rows, the LM head.
  RETURN_IF_ERROR(CudaStatus(
      kernels::LaunchAddRmsNorm(delta, h, W<T>(w.final_norm), rows, hidden, eps, normed, c.stream),
      "final norm"));
  T* final_rows = reinterpret_cast<T*>(s + l.final_rows);
  const int logits = c.shape.logit_rows;
  RETURN_IF_ERROR(CudaStatus(
      kernels::LaunchMoeGather(normed, hidden, logit_rows, logits, 1, final_rows, c.stream),
      "logit rows"));
  return Gemm<T>(c, final_rows, logits, w.lm_head, config.vocab_size, hidden,
                 reinterpret_cast<float*>(s + l.logits));
}

}  // namespace

template <typename T>
absl::Status EnqueueForward(const ForwardContext& c) {
  if (c.timer != nullptr) c.timer->Begin(c.stream);
  const absl::Status status = EnqueueLayers<T>(c);
  if (c.timer != nullptr) c.timer->End(c.stream);
  return status;
}

template absl::Status EnqueueForward<Bf16>(const ForwardContext& context);
template absl::Status EnqueueForward<float>(const ForwardContext& context);

}  // namespace lockstep::cuda

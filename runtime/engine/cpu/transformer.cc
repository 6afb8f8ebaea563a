#include "runtime/engine/cpu/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "common/status_macros.h"
#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/ops.h"
#include "runtime/engine/cpu/rope.h"
#include "runtime/engine/model/safetensors.h"

namespace lockstep::engine {
namespace {

void AddInPlace(float* h, const float* delta, size_t n) {
  for (size_t i = 0; i < n; ++i) h[i] += delta[i];
}

// out[m, hidden] = down(silu(gate(x)) * up(x)).
void RunSwiGlu(const SwiGluWeights& mlp, const float* x, int m, float* out, Arena& arena,
               ThreadPool* threads) {
  const int width = mlp.width;
  const int hidden = mlp.gate_up.k();
  const size_t rows = static_cast<size_t>(m) + 1;
  float* gate_up = arena.Alloc<float>(rows * 2 * width);
  float* act = arena.Alloc<float>(rows * width);
  Gemm(x, m, hidden, mlp.gate_up, nullptr, gate_up, 2 * width, threads);
  for (int i = 0; i < m; ++i) {
    const float* row = gate_up + static_cast<size_t>(i) * 2 * width;
    SiluMul(row, row + width, width, act + static_cast<size_t>(i) * width);
  }
  Gemm(act, m, width, mlp.down, nullptr, out, hidden, threads);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Load(const std::string& dir,
                                                               const std::string& name,
                                                               ExpertGroup group,
                                                               const ExpertLayout& layout) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsModel> tensors, SafetensorsModel::Open(dir));
  ASSIGN_OR_RETURN(ModelWeights weights,
                   LoadWeights(*tensors, config, group.rank, group.world_size, layout));
  return Create(std::move(config), std::move(weights), name, group);
}

std::unique_ptr<Transformer> Transformer::Create(ModelConfig config, ModelWeights weights,
                                                 const std::string& name, ExpertGroup group) {
  return std::unique_ptr<Transformer>(
      new Transformer(std::move(config), std::move(weights), name, group));
}

Transformer::Transformer(ModelConfig config, ModelWeights weights, const std::string& name,
                         ExpertGroup group)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      moe_(config_, name, group),
      mla_(config_),
      inv_freq_(RopeInverseFrequencies(config_)),
      rope_magnitude_(RopeMagnitude(config_)),
      eps_(static_cast<float>(config_.rms_norm_eps)) {}

kv::BlockLayout Transformer::Layout(int tokens_per_block) const {
  return kv::BlockLayout{config_.num_layers, config_.cache_kv_heads(), config_.cache_head_dim(),
                         tokens_per_block};
}

int Transformer::collectives_per_forward() const {
  int moe_layers = 0;
  for (const LayerWeights& layer : weights_.layers) moe_layers += layer.is_moe ? 1 : 0;
  return moe_layers * moe_.collectives_per_layer();
}

void Transformer::CopyKv(const KvPoolView& pool, const SequenceKv& from, const SequenceKv& to,
                         int64_t begin, int64_t end) const {
  const kv::BlockLayout& layout = pool.layout;
  for (int64_t p = begin; p < end; ++p) {
    for (int l = 0; l < layout.num_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        for (int h = 0; h < layout.num_kv_heads; ++h) {
          std::memcpy(KvSlot(pool, to, l, kv, h, p), KvSlot(pool, from, l, kv, h, p),
                      layout.head_dim * sizeof(float));
        }
      }
    }
  }
}

void Transformer::Attention(int layer, const ForwardInput& input, const KvPoolView& pool,
                            float* qkv, const float* cos, const float* sin, float* out,
                            Arena& arena, ThreadPool* threads) const {
  const LayerWeights& w = weights_.layers[layer];
  const int head_dim = config_.head_dim;
  const int half = head_dim / 2;
  const int qkv_width = config_.q_dim() + 2 * config_.kv_dim();
  const int m = static_cast<int>(input.rows.size());
  int64_t max_end = 1;
  for (int i = 0; i < m; ++i) {
    const ForwardRow& row = input.rows[i];
    float* q = qkv + static_cast<size_t>(i) * qkv_width;
    float* k = q + config_.q_dim();
    const float* v = k + config_.kv_dim();
    if (config_.qk_norm) {
      for (int h = 0; h < config_.num_heads; ++h) {
        RmsNorm(q + h * head_dim, w.q_norm.data(), head_dim, eps_, q + h * head_dim);
      }
      for (int h = 0; h < config_.num_kv_heads; ++h) {
        RmsNorm(k + h * head_dim, w.k_norm.data(), head_dim, eps_, k + h * head_dim);
      }
    }
    ApplyRope(q, config_.num_heads, head_dim, cos + static_cast<size_t>(i) * half,
              sin + static_cast<size_t>(i) * half);
    ApplyRope(k, config_.num_kv_heads, head_dim, cos + static_cast<size_t>(i) * half,
              sin + static_cast<size_t>(i) * half);
    WriteKv(pool, input.seqs[row.seq], layer, row.position, k, v);
    max_end = std::max(max_end, row.position + 1);
  }
  const int num_threads = threads == nullptr ? 1 : threads->num_threads();
  const int64_t scratch = static_cast<int64_t>(config_.num_heads / config_.num_kv_heads) * max_end;
  float* scores = arena.Alloc<float>(static_cast<size_t>(num_threads) * scratch);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  auto attend = [&](int64_t begin, int64_t end, int thread) {
    for (int64_t i = begin; i < end; ++i) {
      const ForwardRow& row = input.rows[i];
      AttendRow(pool, input.seqs[row.seq], layer, qkv + static_cast<size_t>(i) * qkv_width,
                row.position, config_.num_heads, scale, scores + thread * scratch,
                out + static_cast<size_t>(i) * config_.q_dim());
    }
  };
  if (threads == nullptr) {
    attend(0, m, 0);
  } else {
    threads->ParallelFor(m, attend);
  }
}

absl::StatusOr<const float*> Transformer::Forward(const ForwardInput& input, const KvPoolView& pool,
                                                  Arena& arena, ThreadPool* threads) const {
  const int m = static_cast<int>(input.rows.size());
  const int hidden = config_.hidden_size;
  const int half = config_.rope_dim() / 2;
  const int qkv_width = config_.mla ? 0 : config_.q_dim() + 2 * config_.kv_dim();
  const int attn_width =
      config_.mla ? config_.num_heads * config_.mla_dims.v_head_dim : config_.q_dim();
  const size_t rows = static_cast<size_t>(m) + 1;  // never a zero-size allocation
  float* h = arena.Alloc<float>(rows * hidden);
  float* cos = arena.Alloc<float>(rows * half);
  float* sin = arena.Alloc<float>(rows * half);
  for (int i = 0; i < m; ++i) {
    const ForwardRow& row = input.rows[i];
    const float* in = input.input_hidden != nullptr
                          ? input.input_hidden + static_cast<size_t>(i) * hidden
                          : weights_.embedding.data() + static_cast<size_t>(row.token) * hidden;
    std::memcpy(h + static_cast<size_t>(i) * hidden, in, hidden * sizeof(float));
    RopeAngles(row.position, inv_freq_.data(), half, cos + static_cast<size_t>(i) * half,
               sin + static_cast<size_t>(i) * half);
    if (rope_magnitude_ != 1.0f) {
      for (int j = 0; j < half; ++j) {
        cos[static_cast<size_t>(i) * half + j] *= rope_magnitude_;
        sin[static_cast<size_t>(i) * half + j] *= rope_magnitude_;
      }
    }
  }
  float* normed = arena.Alloc<float>(rows * hidden);
  float* qkv = arena.Alloc<float>(rows * qkv_width + 1);
  float* attn = arena.Alloc<float>(rows * attn_width);
  float* delta = arena.Alloc<float>(rows * hidden);
  const int width = config_.intermediate_size;
  float* gate_up = arena.Alloc<float>(rows * 2 * std::max(width, 1));
  float* act = arena.Alloc<float>(rows * std::max(width, 1));
  const size_t all = static_cast<size_t>(m) * hidden;
  for (int layer = 0; layer < config_.num_layers; ++layer) {
    const LayerWeights& w = weights_.layers[layer];
    for (int i = 0; i < m; ++i) {
      RmsNorm(h + static_cast<size_t>(i) * hidden, w.attn_norm.data(), hidden, eps_,
              normed + static_cast<size_t>(i) * hidden);
    }
    if (w.mla) {
      mla_.Forward(layer, w.mla_w, input, pool, normed, cos, sin, mla_form_, attn, arena, threads);
    } else {
      Gemm(normed, m, hidden, w.qkv, w.qkv_bias.empty() ? nullptr : w.qkv_bias.data(), qkv,
           qkv_width, threads);
      Attention(layer, input, pool, qkv, cos, sin, attn, arena, threads);
    }
    Gemm(attn, m, attn_width, w.o, nullptr, delta, hidden, threads);
    AddInPlace(h, delta, all);
    for (int i = 0; i < m; ++i) {
      RmsNorm(h + static_cast<size_t>(i) * hidden, w.mlp_norm.data(), hidden, eps_,
              normed + static_cast<size_t>(i) * hidden);
    }
    if (w.is_moe) {
      RETURN_IF_ERROR(moe_.Forward(layer, w.moe, normed, m, delta, arena, threads));
      if (w.shared.width > 0) {  // every rank, every row: added after the routed experts
        float* shared = arena.Alloc<float>(rows * hidden);
        RunSwiGlu(w.shared, normed, m, shared, arena, threads);
        AddInPlace(delta, shared, all);
      }
    } else {
      Gemm(normed, m, hidden, w.mlp.gate_up, nullptr, gate_up, 2 * width, threads);
      for (int i = 0; i < m; ++i) {
        const float* row = gate_up + static_cast<size_t>(i) * 2 * width;
        SiluMul(row, row + width, width, act + static_cast<size_t>(i) * width);
      }
      Gemm(act, m, width, w.mlp.down, nullptr, delta, hidden, threads);
    }
    AddInPlace(h, delta, all);
  }
  if (input.hidden_out != nullptr) std::memcpy(input.hidden_out, h, all * sizeof(float));
  const int num_logits = static_cast<int>(input.logit_rows.size());
  float* final_rows = arena.Alloc<float>((static_cast<size_t>(num_logits) + 1) * hidden);
  for (int j = 0; j < num_logits; ++j) {
    RmsNorm(h + static_cast<size_t>(input.logit_rows[j]) * hidden, weights_.final_norm.data(),
            hidden, eps_, final_rows + static_cast<size_t>(j) * hidden);
  }
  float* logits = arena.Alloc<float>((static_cast<size_t>(num_logits) + 1) * config_.vocab_size);
  Gemm(final_rows, num_logits, hidden, weights_.lm_head, nullptr, logits, config_.vocab_size,
       threads);
  return logits;
}

}  // namespace lockstep::engine

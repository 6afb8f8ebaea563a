#include "runtime/engine/cpu/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "runtime/engine/cpu/gemm.h"
#include "runtime/engine/cpu/ops.h"
#include "runtime/engine/cpu/rope.h"

namespace lockstep::engine {
namespace {

// The cached latent vector of `position`: the K plane's values then the V plane's.
struct LatentSlot {
  const float* first;   // cache_head_dim values
  const float* second;  // cache_head_dim values
};

LatentSlot Slot(const KvPoolView& pool, const SequenceKv& seq, int layer, int64_t position) {
  return {KvSlot(pool, seq, layer, 0, 0, position), KvSlot(pool, seq, layer, 1, 0, position)};
}

// Per-thread scratch of one row's attention.
struct RowScratch {
  float* scores;  // max_end
  float* query;   // 2 * half: the latent-space query (absorbed) or key (expanded)
  float* acc;     // 2 * half: the weighted sum of latent vectors
  float* latent;  // 2 * half: one cached vector, contiguous
  float* key;     // qk_head_dim: one expanded key (expanded form)
  float* value;   // v_head_dim: one expanded value (expanded form)
};

}  // namespace

void MlaAttention::Forward(int layer, const MlaWeights& w, const ForwardInput& input,
                           const KvPoolView& pool, const float* x, const float* cos,
                           const float* sin, MlaForm form, float* out, Arena& arena,
                           ThreadPool* threads) const {
  const MlaDims& d = config_.mla_dims;
  const int m = static_cast<int>(input.rows.size());
  const int hidden = config_.hidden_size;
  const int heads = config_.num_heads;
  const int qk = d.qk_head_dim();
  const int nope = d.qk_nope_head_dim;
  const int rope = d.qk_rope_head_dim;
  const int lora = d.kv_lora_rank;
  const int vdim = d.v_head_dim;
  const int half = config_.cache_head_dim();  // the latent vector is 2 * half, zero-padded
  const int rope_half = rope / 2;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const size_t rows = static_cast<size_t>(m) + 1;

  // Queries [rows, heads * qk].
  float* q = arena.Alloc<float>(rows * heads * qk);
  if (d.q_lora_rank > 0) {
    float* q_low = arena.Alloc<float>(rows * d.q_lora_rank);
    Gemm(x, m, hidden, w.q_a, nullptr, q_low, d.q_lora_rank, threads);
    for (int i = 0; i < m; ++i) {
      float* r = q_low + static_cast<size_t>(i) * d.q_lora_rank;
      RmsNorm(r, w.q_a_norm.data(), d.q_lora_rank, eps, r);
    }
    Gemm(q_low, m, d.q_lora_rank, w.q_b, nullptr, q, heads * qk, threads);
  } else {
    Gemm(x, m, hidden, w.q, nullptr, q, heads * qk, threads);
  }
  // Latent vectors [rows, latent_dim]: normalise c, rotate k_pe, cache both.
  float* kv = arena.Alloc<float>(rows * d.latent_dim());
  Gemm(x, m, hidden, w.kv_a, nullptr, kv, d.latent_dim(), threads);
  float* padded = arena.Alloc<float>(2 * static_cast<size_t>(half));
  int64_t max_end = 1;
  for (int i = 0; i < m; ++i) {
    const ForwardRow& row = input.rows[i];
    const float* row_cos = cos + static_cast<size_t>(i) * rope_half;
    const float* row_sin = sin + static_cast<size_t>(i) * rope_half;
    float* c = kv + static_cast<size_t>(i) * d.latent_dim();
    RmsNorm(c, w.kv_a_norm.data(), lora, eps, c);
    ApplyRopeInterleaved(c + lora, 1, rope, rope, row_cos, row_sin);
    ApplyRopeInterleaved(q + static_cast<size_t>(i) * heads * qk + nope, heads, qk, rope, row_cos,
                         row_sin);
    std::fill(padded, padded + 2 * half, 0.0f);
    std::memcpy(padded, c, d.latent_dim() * sizeof(float));
    const SequenceKv& seq = input.seqs[row.seq];
    std::memcpy(KvSlot(pool, seq, layer, 0, 0, row.position), padded, half * sizeof(float));
    std::memcpy(KvSlot(pool, seq, layer, 1, 0, row.position), padded + half, half * sizeof(float));
    max_end = std::max(max_end, row.position + 1);
  }

  const int num_threads = threads == nullptr ? 1 : threads->num_threads();
  const size_t per_thread = static_cast<size_t>(max_end) + 6 * half + qk + vdim;
  float* scratch = arena.Alloc<float>(static_cast<size_t>(num_threads) * per_thread);
  const float scale = static_cast<float>(config_.softmax_scale());
  const int kv_b_rows = nope + vdim;  // per head: W_UK rows, then W_UV rows
  auto attend = [&](int64_t begin, int64_t end, int thread) {
    float* base = scratch + static_cast<size_t>(thread) * per_thread;
    float* after = base + max_end;
    const RowScratch s{
        base, after, after + 2 * half, after + 4 * half, after + 6 * half, after + 6 * half + qk};
    for (int64_t i = begin; i < end; ++i) {
      const ForwardRow& row = input.rows[i];
      const SequenceKv& seq = input.seqs[row.seq];
      const int count = static_cast<int>(row.position + 1);
      for (int h = 0; h < heads; ++h) {
        const float* qh = q + (static_cast<size_t>(i) * heads + h) * qk;
        const float* w_uk = w.kv_b.data() + static_cast<size_t>(h) * kv_b_rows * lora;
        const float* w_uv = w_uk + static_cast<size_t>(nope) * lora;
        float* oh = out + (static_cast<size_t>(i) * heads + h) * vdim;
        if (form == MlaForm::kAbsorbed) {
          // query = [q_nope W_UK_h | q_pe | 0]: scores against the latent vectors.
          std::fill(s.query, s.query + 2 * half, 0.0f);
          for (int n = 0; n < nope; ++n) {
            Axpy(qh[n], w_uk + static_cast<size_t>(n) * lora, s.query, lora);
          }
          std::memcpy(s.query + lora, qh + nope, rope * sizeof(float));
          for (int t = 0; t < count; ++t) {
            const LatentSlot slot = Slot(pool, seq, layer, t);
            s.scores[t] =
                (Dot(s.query, slot.first, half) + Dot(s.query + half, slot.second, half)) * scale;
          }
          Softmax(s.scores, count);
          std::fill(s.acc, s.acc + 2 * half, 0.0f);
          for (int t = 0; t < count; ++t) {
            const LatentSlot slot = Slot(pool, seq, layer, t);
            Axpy(s.scores[t], slot.first, s.acc, half);
            Axpy(s.scores[t], slot.second, s.acc + half, half);
          }
          for (int j = 0; j < vdim; ++j) {
            oh[j] = Dot(w_uv + static_cast<size_t>(j) * lora, s.acc, lora);
          }
          continue;
        }
        // Expanded: key_t = [W_UK_h c_t | k_pe_t], value_t = W_UV_h c_t.
        for (int t = 0; t < count; ++t) {
          const LatentSlot slot = Slot(pool, seq, layer, t);
          std::memcpy(s.latent, slot.first, half * sizeof(float));
          std::memcpy(s.latent + half, slot.second, half * sizeof(float));
          for (int n = 0; n < nope; ++n) {
            s.key[n] = Dot(w_uk + static_cast<size_t>(n) * lora, s.latent, lora);
          }
          std::memcpy(s.key + nope, s.latent + lora, rope * sizeof(float));
          s.scores[t] = Dot(qh, s.key, qk) * scale;
        }
        Softmax(s.scores, count);
        std::fill(oh, oh + vdim, 0.0f);
        for (int t = 0; t < count; ++t) {
          const LatentSlot slot = Slot(pool, seq, layer, t);
          std::memcpy(s.latent, slot.first, half * sizeof(float));
          std::memcpy(s.latent + half, slot.second, half * sizeof(float));
          for (int j = 0; j < vdim; ++j) {
            s.value[j] = Dot(w_uv + static_cast<size_t>(j) * lora, s.latent, lora);
          }
          Axpy(s.scores[t], s.value, oh, vdim);
        }
      }
    }
  };
  if (threads == nullptr) {
    attend(0, m, 0);
  } else {
    threads->ParallelFor(m, attend);
  }
}

}  // namespace lockstep::engine

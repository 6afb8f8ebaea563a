#include "runtime/engine/paged_attention.h"

#include <algorithm>
#include <cstring>

#include "runtime/engine/ops.h"

namespace lockstep::engine {
namespace {

// Calls fn(first_position, data, count) for the contiguous runs holding positions
// [0, end) of (layer, kv, head): whole or partial blocks, then the spec buffer.
template <typename Fn>
void ForEachRun(const KvPoolView& pool, const SequenceKv& seq, int layer, int kv, int head,
                int64_t end, Fn&& fn) {
  const kv::BlockLayout& layout = pool.layout;
  const int64_t tpb = layout.tokens_per_block;
  const size_t head_offset = layout.Offset(layer, kv, head, 0);
  const int64_t pool_end = std::min(end, seq.spec_base);
  for (int64_t start = 0; start < pool_end; start += tpb) {
    const int64_t block = seq.blocks[start / tpb].value();
    const float* data = pool.storage + static_cast<size_t>(block) * layout.BlockFloats() + head_offset;
    fn(start, data, std::min(tpb, pool_end - start));
  }
  if (end > seq.spec_base) {
    const float* data = seq.spec + (static_cast<size_t>((layer * 2 + kv) * layout.num_kv_heads + head) *
                                    seq.spec_tokens) *
                                       layout.head_dim;
    fn(seq.spec_base, data, end - seq.spec_base);
  }
}

}  // namespace

size_t SpecBufferFloats(const kv::BlockLayout& layout, int tokens) {
  return static_cast<size_t>(layout.num_layers) * 2 * layout.num_kv_heads * tokens * layout.head_dim;
}

float* KvSlot(const KvPoolView& pool, const SequenceKv& seq, int layer, int kv, int head,
              int64_t position) {
  const kv::BlockLayout& layout = pool.layout;
  if (position >= seq.spec_base) {
    const size_t plane = static_cast<size_t>((layer * 2 + kv) * layout.num_kv_heads + head);
    return seq.spec + (plane * seq.spec_tokens + (position - seq.spec_base)) * layout.head_dim;
  }
  const int64_t tpb = layout.tokens_per_block;
  const int64_t block = seq.blocks[position / tpb].value();
  return pool.storage + static_cast<size_t>(block) * layout.BlockFloats() +
         layout.Offset(layer, kv, head, static_cast<int>(position % tpb));
}

void WriteKv(const KvPoolView& pool, const SequenceKv& seq, int layer, int64_t position,
             const float* k, const float* v) {
  const int head_dim = pool.layout.head_dim;
  for (int h = 0; h < pool.layout.num_kv_heads; ++h) {
    std::memcpy(KvSlot(pool, seq, layer, 0, h, position), k + h * head_dim, head_dim * sizeof(float));
    std::memcpy(KvSlot(pool, seq, layer, 1, h, position), v + h * head_dim, head_dim * sizeof(float));
  }
}

void AttendRow(const KvPoolView& pool, const SequenceKv& seq, int layer, const float* q,
               int64_t position, int num_heads, float scale, float* scores, float* out) {
  const int head_dim = pool.layout.head_dim;
  const int kv_heads = pool.layout.num_kv_heads;
  const int group = num_heads / kv_heads;
  const int64_t end = position + 1;
  for (int h = 0; h < num_heads; ++h) {
    const int g = h / group;
    const float* qh = q + static_cast<size_t>(h) * head_dim;
    ForEachRun(pool, seq, layer, 0, g, end, [&](int64_t first, const float* keys, int64_t count) {
      for (int64_t t = 0; t < count; ++t) {
        scores[first + t] = Dot(qh, keys + t * head_dim, head_dim) * scale;
      }
    });
    Softmax(scores, static_cast<int>(end));
    float* oh = out + static_cast<size_t>(h) * head_dim;
    std::fill(oh, oh + head_dim, 0.0f);
    ForEachRun(pool, seq, layer, 1, g, end, [&](int64_t first, const float* values, int64_t count) {
      for (int64_t t = 0; t < count; ++t) Axpy(scores[first + t], values + t * head_dim, oh, head_dim);
    });
  }
}

}  // namespace lockstep::engine

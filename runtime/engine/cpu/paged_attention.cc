#include "runtime/engine/cpu/paged_attention.h"

#include <algorithm>
#include <cstring>

#include "runtime/engine/cpu/ops.h"

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
    const float* data =
        pool.storage + static_cast<size_t>(block) * layout.BlockElements() + head_offset;
    fn(start, data, std::min(tpb, pool_end - start));
  }
  if (end > seq.spec_base) {
    const float* data =
        seq.spec +
        (static_cast<size_t>((layer * 2 + kv) * layout.num_kv_heads + head) * seq.spec_tokens) *
            layout.head_dim;
    fn(seq.spec_base, data, end - seq.spec_base);
  }
}

}  // namespace

size_t SpecBufferFloats(const kv::BlockLayout& layout, int tokens) {
  return static_cast<size_t>(layout.num_layers) * 2 * layout.num_kv_heads * tokens *
         layout.head_dim;
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
  return pool.storage + static_cast<size_t>(block) * layout.BlockElements() +
         layout.Offset(layer, kv, head, static_cast<int>(position % tpb));
}

void WriteKv(const KvPoolView& pool, const SequenceKv& seq, int layer, int64_t position,
             const float* k, const float* v) {
  const int head_dim = pool.layout.head_dim;
  for (int h = 0; h < pool.layout.num_kv_heads; ++h) {
    std::memcpy(KvSlot(pool, seq, layer, 0, h, position), k + h * head_dim,
                head_dim * sizeof(float));
    std::memcpy(KvSlot(pool, seq, layer, 1, h, position), v + h * head_dim,
                head_dim * sizeof(float));
  }
}

void AttendRow(const KvPoolView& pool, const SequenceKv& seq, int layer, const float* q,
               int64_t position, int num_heads, float scale, float* scores, float* out) {
  const int head_dim = pool.layout.head_dim;
  const int kv_heads = pool.layout.num_kv_heads;
  const int group = num_heads / kv_heads;
  const int64_t end = position + 1;
  for (int g = 0; g < kv_heads; ++g) {
    // The query heads of this KV head: scores[j * end + t] for head g * group + j.
    for (int j = 0; j < group; ++j) {
      const float* qh = q + static_cast<size_t>(g * group + j) * head_dim;
      float* sh = scores + static_cast<size_t>(j) * end;
      ForEachRun(pool, seq, layer, 0, g, end, [&](int64_t first, const float* keys, int64_t count) {
        DotMany(qh, keys, static_cast<int>(count), head_dim, scale, sh + first);
      });
      Softmax(sh, static_cast<int>(end));
    }
    float* og = out + static_cast<size_t>(g * group) * head_dim;
    std::fill(og, og + static_cast<size_t>(group) * head_dim, 0.0f);
    ForEachRun(pool, seq, layer, 1, g, end, [&](int64_t first, const float* values, int64_t count) {
      int j = 0;
      for (; j + 2 <= group; j += 2) {
        WeightedSumPair(scores + j * end + first, scores + (j + 1) * end + first, values,
                        static_cast<int>(count), head_dim, og + j * head_dim,
                        og + (j + 1) * head_dim);
      }
      if (j < group) {
        WeightedSum(scores + j * end + first, values, static_cast<int>(count), head_dim,
                    og + j * head_dim);
      }
    });
  }
}

}  // namespace lockstep::engine

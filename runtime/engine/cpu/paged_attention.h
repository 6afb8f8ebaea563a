// Attention over K/V kept in place in the KV pool's blocks (docs/design.md §5): a sequence's
// token at position p lives in block blocks[p / tokens_per_block], slot
// p % tokens_per_block, at the offsets of kv::BlockLayout. Nothing is gathered into a
// contiguous copy; keys are visited block by block.
//
// A sequence may also keep its newest positions (>= spec_base) in an engine-owned
// buffer instead of the pool: the draft model's speculative proposals, which must not
// be written past the capacity the host granted (model_engine.h, KV contract).
//
// Each query row's result depends only on its own q and the sequence's K/V, in a fixed
// order: bitwise independent of the batch.
#ifndef LOCKSTEP_RUNTIME_ENGINE_CPU_PAGED_ATTENTION_H_
#define LOCKSTEP_RUNTIME_ENGINE_CPU_PAGED_ATTENTION_H_

#include <cstdint>
#include <limits>

#include "absl/types/span.h"
#include "common/ids.h"
#include "kvcache/block_layout.h"

namespace lockstep::engine {

// The host's KV slab of one pool (not owned).
struct KvPoolView {
  float* storage = nullptr;
  kv::BlockLayout layout;
  int32_t num_blocks = 0;
};

// Where one sequence's K/V are during one forward of one model.
struct SequenceKv {
  absl::Span<const BlockId> blocks;  // the block table in the pool
  // Positions >= spec_base live in `spec`, laid out
  // [layers][2][kv_heads][spec_tokens][head_dim] (slot = position - spec_base).
  int64_t spec_base = std::numeric_limits<int64_t>::max();
  float* spec = nullptr;
  int spec_tokens = 0;
};

// Floats of a spec buffer for `tokens` positions of a model with `layout`'s shape.
size_t SpecBufferFloats(const kv::BlockLayout& layout, int tokens);

// The head_dim floats of K (kv = 0) or V (kv = 1) of `head` at `position`. The block
// table must cover `position` (checked by the caller before the forward).
float* KvSlot(const KvPoolView& pool, const SequenceKv& seq, int layer, int kv, int head,
              int64_t position);

// Stores one token's K and V ([kv_heads][head_dim] each) at `position`.
void WriteKv(const KvPoolView& pool, const SequenceKv& seq, int layer, int64_t position,
             const float* k, const float* v);

// Causal attention of one query token at `position` over keys [0, position]:
// q and out are [num_heads][head_dim]; heads share kv heads in groups (GQA).
// `scores` is scratch for (num_heads / kv_heads) * (position + 1) floats.
void AttendRow(const KvPoolView& pool, const SequenceKv& seq, int layer, const float* q,
               int64_t position, int num_heads, float scale, float* scores, float* out);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_RUNTIME_ENGINE_CPU_PAGED_ATTENTION_H_

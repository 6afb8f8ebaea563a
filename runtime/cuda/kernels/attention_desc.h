// Plain structs shared by the host planners and the attention kernels (no absl, no
// CUDA types: .cu files include this header).
#ifndef LOCKSTEP_RUNTIME_CUDA_KERNELS_ATTENTION_DESC_H_
#define LOCKSTEP_RUNTIME_CUDA_KERNELS_ATTENTION_DESC_H_

#include <cstdint>

namespace lockstep::cuda::kernels {

// The KV pool on the device in the kv::BlockLayout order (layers x {K, V} x kv_heads x
// tokens_per_block x head_dim per block, bf16 elements, or f32 with element_bytes 4: the
// engine's f32 mode, whose queries and outputs are f32 too), and the packed block
// tables: block_table[seq * table_stride + i] is the i-th block of sequence `seq`.
//
// Optionally, as the CPU engine's SequenceKv (runtime/engine/cpu/paged_attention.h), the
// positions >= spec_base[seq] of sequence `seq` (the draft model's speculative K/V) live
// in its own buffer spec[seq], laid out [layers][2][kv_heads][spec_tokens][head_dim]
// (slot = position - spec_base[seq]), instead of the pool.
struct PagedKvDesc {
  void* storage = nullptr;    // num_blocks * BlockElements() elements, 16-byte aligned
  int32_t element_bytes = 2;  // 2: bf16, 4: f32
  int32_t num_layers = 1;
  int32_t num_kv_heads = 1;
  int32_t head_dim = 1;
  int32_t tokens_per_block = 16;
  const int32_t* block_table = nullptr;  // device
  int32_t table_stride = 0;
  const int32_t* spec_base = nullptr;  // device, per sequence (INT32_MAX: none); null: none
  void* const* spec = nullptr;         // device array of 16-byte aligned device buffers
  int32_t spec_tokens = 0;
};

// The attention kernels' shape limits (checked by the launchers, and by the CUDA engine
// at load: PlanScratch): the largest head_dim of decode and prefill attention, and the
// largest GQA group (num_heads / num_kv_heads) of decode attention.
inline constexpr int kMaxDecodeHeadDim = 256;
inline constexpr int kMaxDecodeGroup = 16;
inline constexpr int kMaxPrefillHeadDim = 256;
// The largest latent vector (2 * cache head_dim) of MLA attention (mla_kernels.h).
inline constexpr int kMaxMlaLatent = 1024;

// One query row of decode attention: it attends to positions [0, context_len) of
// sequence `seq`; its splits own partial slots [split_begin, split_begin + num_splits),
// split s covering [s * split_tokens, min(context_len, (s + 1) * split_tokens)). Its
// query and output are row `qo_row` of q and out (the engine's packed row: decode rows
// need not be contiguous in the step).
struct DecodeRowDesc {
  int32_t seq = 0;
  int32_t context_len = 0;
  int32_t split_begin = 0;
  int32_t num_splits = 0;
  int32_t split_tokens = 0;
  int32_t qo_row = 0;
};

// One CTA column of the split kernel: split `split` of query row `row`.
// A negative row marks an unused item (a CUDA graph's static grid is larger than the
// step's plan): its CTA does nothing.
struct DecodeWorkItem {
  int32_t row = 0;
  int32_t split = 0;
};

// The most query rows of one prefill tile.
inline constexpr int kMaxPrefillTileRows = 64;

// One CTA column of the prefill kernel: query rows [row_begin, row_begin + num_rows) of
// the packed Q, all of sequence `seq`; row row_begin + i sits at position
// first_position + i and attends causally to [0, first_position + i].
struct PrefillTileDesc {
  int32_t seq = 0;
  int32_t row_begin = 0;
  int32_t num_rows = 0;
  int32_t first_position = 0;
};

}  // namespace lockstep::cuda::kernels

#endif  // LOCKSTEP_RUNTIME_CUDA_KERNELS_ATTENTION_DESC_H_

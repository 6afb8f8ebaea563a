// The packed input of one device forward: everything the kernels read about the step
// (tokens, positions, the sequences' block tables and spec buffers, which rows return
// logits, the attention plans) in one host buffer that goes to the device in a single
// copy. Plain C++ (no CUDA): the CUDA transformer packs with it, the CPU tests check it.
//
// Attention: the rows of a sequence all of whose rows return logits (a generation step
// with the drafts it verifies, or a one-token last chunk) attend through the decode
// kernel, row by row, with splits planned from each row's own length; the rows of any
// other sequence (a context chunk) through the prefill kernel's tiles. Both choices
// depend only on the sequence itself, so a row's result does not depend on the batch,
// and verifying K drafts computes each row as a step without speculation would.
//
// A CUDA graph replays one fixed shape: with `graph_rows` set, the step is padded to
// that many rows (pad rows: token 0 at position 0, writing no K/V, attending to one
// zero position of the pad sequence, the table's last row, whose spec buffer is the
// engine's zeroed pad buffer), the tables to graph_seqs rows of graph_table_stride, the
// decode plan to every row with graph_max_splits items each (unused ones marked), and
// every row returns logits (the first input.logit_rows.size() are the real ones).
//
// Thread-compatible value types.
#ifndef LOCKSTEP_RUNTIME_CUDA_ENGINE_STEP_LAYOUT_H_
#define LOCKSTEP_RUNTIME_CUDA_ENGINE_STEP_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/decode_split_plan.h"
#include "runtime/engine/cpu/forward_model.h"

namespace lockstep::cuda {

// The sizes of a packed step (every array's element count).
struct StepShape {
  int32_t rows = 0;        // packed rows (a graph's bucket)
  int32_t logit_rows = 0;  // rows whose logits the forward computes
  int32_t seqs = 0;        // block-table rows, the pad sequence (last) included
  int32_t table_stride = 0;
  int32_t decode_rows = 0;
  int32_t decode_items = 0;
  int32_t prefill_tiles = 0;
  int32_t spec_tokens = 1;  // PagedKvDesc::spec_tokens: the sequences' spec buffer size

  friend bool operator==(const StepShape&, const StepShape&) = default;
};

// Byte offsets of the arrays in the packed buffer, each 16-byte aligned.
struct StepOffsets {
  size_t tokens = 0;         // int32[rows]
  size_t positions = 0;      // int32[rows]
  size_t kv_seqs = 0;        // int32[rows]: the sequence a row's K/V goes to; -1: a pad row
  size_t logit_rows = 0;     // int32[logit_rows]
  size_t block_table = 0;    // int32[seqs * table_stride]
  size_t spec_base = 0;      // int32[seqs] (INT32_MAX: no spec buffer)
  size_t spec_ptrs = 0;      // uint64[seqs]: the spec buffers' device addresses
  size_t decode_rows = 0;    // kernels::DecodeRowDesc[decode_rows]
  size_t decode_items = 0;   // kernels::DecodeWorkItem[decode_items]
  size_t prefill_tiles = 0;  // kernels::PrefillTileDesc[prefill_tiles]
  size_t bytes = 0;          // the whole buffer
};

StepOffsets LayoutStep(const StepShape& shape);

struct StepOptions {
  int tokens_per_block = 16;
  int32_t num_blocks = 0;  // of the pool (block ids are checked against it)
  kernels::DecodeSplitOptions decode;
  // The engine's zeroed pad spec buffer (the pad sequence's; its device address).
  uint64_t pad_spec = 0;
  // A graph's shape; 0: eager (the step's own shape).
  int32_t graph_rows = 0;
  int32_t graph_seqs = 0;
  int32_t graph_table_stride = 0;
  int32_t graph_max_splits = 0;
  // The positions of every spec buffer a graph replays with (the pad buffer's); 0: any
  // (the step's own, as eagerly).
  int32_t graph_spec_tokens = 0;
};

// The packed step: its shape, offsets and host bytes.
struct PackedStep {
  StepShape shape;
  StepOffsets offsets;
  std::vector<std::byte> bytes;
  int32_t real_rows = 0;    // rows of the input (the rest pad a graph)
  int32_t real_logits = 0;  // logit rows of the input
};

// Packs `input`. InvalidArgument (naming the sequence or row) for a row beyond 2^31
// positions, a block table that does not cover a row's position below its spec_base,
// a block id outside the pool, spec buffers of differing sizes, or a step that does
// not fit the graph shape.
absl::StatusOr<PackedStep> PackStep(const engine::ForwardInput& input, const StepOptions& options);

}  // namespace lockstep::cuda

#endif  // LOCKSTEP_RUNTIME_CUDA_ENGINE_STEP_LAYOUT_H_

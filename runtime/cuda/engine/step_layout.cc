#include "runtime/cuda/engine/step_layout.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "runtime/cuda/kernels/block_table_pack.h"
#include "runtime/cuda/kernels/prefill_tile_plan.h"

namespace lockstep::cuda {
namespace {

constexpr size_t kAlign = 16;
constexpr int32_t kNoSpec = std::numeric_limits<int32_t>::max();

size_t Align(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <typename T>
T* At(PackedStep& step, size_t offset) {
  return reinterpret_cast<T*>(step.bytes.data() + offset);
}

// The rows of each sequence: [first, first + count), and whether all return logits.
struct SeqRows {
  int32_t first = -1;
  int32_t count = 0;
  bool all_logits = true;
  bool consecutive = true;
};

}  // namespace

StepOffsets LayoutStep(const StepShape& shape) {
  StepOffsets o;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = Align(at + bytes);
    return offset;
  };
  o.tokens = take(sizeof(int32_t) * shape.rows);
  o.positions = take(sizeof(int32_t) * shape.rows);
  o.kv_seqs = take(sizeof(int32_t) * shape.rows);
  o.logit_rows = take(sizeof(int32_t) * shape.logit_rows);
  o.block_table = take(sizeof(int32_t) * static_cast<size_t>(shape.seqs) * shape.table_stride);
  o.spec_base = take(sizeof(int32_t) * shape.seqs);
  o.spec_ptrs = take(sizeof(uint64_t) * shape.seqs);
  o.decode_rows = take(sizeof(kernels::DecodeRowDesc) * shape.decode_rows);
  o.decode_items = take(sizeof(kernels::DecodeWorkItem) * shape.decode_items);
  o.prefill_tiles = take(sizeof(kernels::PrefillTileDesc) * shape.prefill_tiles);
  o.bytes = at;
  return o;
}

absl::StatusOr<PackedStep> PackStep(const engine::ForwardInput& input, const StepOptions& options) {
  const bool graph = options.graph_rows > 0;
  const int32_t rows = static_cast<int32_t>(input.rows.size());
  const int32_t num_seqs = static_cast<int32_t>(input.seqs.size());
  const int32_t logits = static_cast<int32_t>(input.logit_rows.size());
  if (graph && (rows > options.graph_rows || num_seqs + 1 > options.graph_seqs)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a step of ", rows, " rows and ", num_seqs, " sequences does not fit the graph of ",
        options.graph_rows, " rows and ", options.graph_seqs - 1, " sequences"));
  }

  // Per sequence: its rows, and whether they all return logits (decode attention).
  std::vector<SeqRows> seq_rows(num_seqs);
  std::vector<bool> is_logit(rows, false);
  for (int32_t r : input.logit_rows) is_logit[r] = true;
  for (int32_t r = 0; r < rows; ++r) {
    const engine::ForwardRow& row = input.rows[r];
    if (row.position < 0 || row.position >= std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", r, ": position ", row.position, " is not in [0, 2^31 - 1)"));
    }
    const engine::SequenceKv& kv = input.seqs[row.seq];
    if (kv.spec == nullptr && row.position >= kv.spec_base) {
      return absl::InvalidArgumentError(absl::StrCat("row ", r, ": position ", row.position,
                                                     " of sequence ", row.seq,
                                                     " lies in a spec buffer that is missing"));
    }
    SeqRows& s = seq_rows[row.seq];
    if (s.first < 0) s.first = r;
    if (s.count > 0 && input.rows[r - 1].position + 1 != row.position) s.consecutive = false;
    ++s.count;
    s.all_logits = s.all_logits && is_logit[r];
  }

  // Block tables: each covers its rows' positions below its spec_base.
  std::vector<absl::Span<const BlockId>> tables;
  std::vector<int64_t> covered;
  int32_t spec_tokens = 0;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const engine::SequenceKv& seq = input.seqs[s];
    tables.push_back(seq.blocks);
    int64_t end = 0;
    if (seq_rows[s].count > 0) {
      end = input.rows[seq_rows[s].first + seq_rows[s].count - 1].position + 1;
    }
    covered.push_back(std::min(end, seq.spec_base));
    if (seq.spec != nullptr) {
      if (spec_tokens != 0 && seq.spec_tokens != spec_tokens) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": a spec buffer of ",
                                                       seq.spec_tokens, " positions, another of ",
                                                       spec_tokens));
      }
      spec_tokens = seq.spec_tokens;
    }
  }
  tables.push_back({});  // the pad sequence
  covered.push_back(0);
  ASSIGN_OR_RETURN(
      kernels::PackedBlockTable table,
      kernels::PackBlockTables(tables, covered, options.tokens_per_block, options.num_blocks,
                               graph ? options.graph_table_stride : 0));
  if (graph && table.stride > options.graph_table_stride) {
    return absl::InvalidArgumentError(absl::StrCat("a block table of ", table.stride,
                                                   " blocks exceeds the graph's ",
                                                   options.graph_table_stride));
  }

  // Attention plans.
  std::vector<int64_t> decode_lens;
  std::vector<int32_t> decode_seqs, decode_rows;
  std::vector<kernels::PrefillChunk> chunks;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const SeqRows& sr = seq_rows[s];
    if (sr.count == 0) continue;
    if (sr.all_logits || !sr.consecutive) {
      for (int32_t r = sr.first; r < sr.first + sr.count; ++r) {
        decode_lens.push_back(input.rows[r].position + 1);
        decode_seqs.push_back(s);
        decode_rows.push_back(r);
      }
    } else {
      chunks.push_back({s, sr.first, sr.count, input.rows[sr.first].position});
    }
  }
  const int32_t pad_seq = graph ? options.graph_seqs - 1 : num_seqs;
  if (graph) {
    for (int32_t r = rows; r < options.graph_rows; ++r) {
      decode_lens.push_back(1);
      decode_seqs.push_back(pad_seq);
      decode_rows.push_back(r);
    }
  }
  ASSIGN_OR_RETURN(kernels::DecodeSplitPlan plan,
                   kernels::PlanDecodeSplits(decode_lens, decode_seqs, options.decode));
  for (size_t i = 0; i < plan.rows.size(); ++i) plan.rows[i].qo_row = decode_rows[i];
  ASSIGN_OR_RETURN(std::vector<kernels::PrefillTileDesc> tiles,
                   kernels::PlanPrefillTiles(chunks, kernels::kMaxPrefillTileRows));

  PackedStep step;
  step.real_rows = rows;
  step.real_logits = logits;
  StepShape& shape = step.shape;
  shape.rows = graph ? options.graph_rows : rows;
  shape.logit_rows = graph ? options.graph_rows : logits;
  shape.seqs = graph ? options.graph_seqs : num_seqs + 1;
  shape.table_stride = table.stride;
  shape.decode_rows = static_cast<int32_t>(plan.rows.size());
  shape.decode_items = graph ? options.graph_rows * options.graph_max_splits : plan.total_splits();
  shape.prefill_tiles = static_cast<int32_t>(tiles.size());
  shape.spec_tokens = std::max(spec_tokens, 1);
  if (graph && options.graph_spec_tokens > 0) {
    // A graph's kernels read every spec buffer (its shape's) with the stride it was
    // captured with, with or without any in the step.
    if (spec_tokens != 0 && spec_tokens != options.graph_spec_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("spec buffers of ", spec_tokens,
                                                     " positions in a graph of ",
                                                     options.graph_spec_tokens));
    }
    shape.spec_tokens = options.graph_spec_tokens;
  }
  if (graph && (!tiles.empty() || plan.total_splits() > shape.decode_items)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a graph replays decode rows only: the step has ", tiles.size(), " prefill tiles and ",
        plan.total_splits(), " splits for ", shape.decode_items, " items"));
  }
  step.offsets = LayoutStep(shape);
  step.bytes.assign(step.offsets.bytes, std::byte{0});

  int32_t* tokens = At<int32_t>(step, step.offsets.tokens);
  int32_t* positions = At<int32_t>(step, step.offsets.positions);
  int32_t* kv_seqs = At<int32_t>(step, step.offsets.kv_seqs);
  for (int32_t r = 0; r < shape.rows; ++r) {
    const bool real = r < rows;
    tokens[r] = real ? input.rows[r].token : 0;
    positions[r] = real ? static_cast<int32_t>(input.rows[r].position) : 0;
    kv_seqs[r] = real ? input.rows[r].seq : -1;
  }
  int32_t* logit_rows = At<int32_t>(step, step.offsets.logit_rows);
  for (int32_t j = 0; j < shape.logit_rows; ++j) {
    logit_rows[j] = j < logits ? input.logit_rows[j] : 0;
  }
  // Table rows of the sequences, then (a graph) unused rows, then the pad sequence.
  int32_t* out_table = At<int32_t>(step, step.offsets.block_table);
  std::fill(out_table, out_table + static_cast<size_t>(shape.seqs) * shape.table_stride,
            kernels::kPadBlock);
  std::copy(table.table.begin(), table.table.begin() + static_cast<size_t>(num_seqs) * table.stride,
            out_table);
  int32_t* spec_base = At<int32_t>(step, step.offsets.spec_base);
  uint64_t* spec_ptrs = At<uint64_t>(step, step.offsets.spec_ptrs);
  for (int32_t s = 0; s < shape.seqs; ++s) {
    spec_base[s] = kNoSpec;
    spec_ptrs[s] = 0;
    if (s < num_seqs && input.seqs[s].spec != nullptr) {
      spec_base[s] = static_cast<int32_t>(
          std::min<int64_t>(input.seqs[s].spec_base, std::numeric_limits<int32_t>::max()));
      spec_ptrs[s] = reinterpret_cast<uint64_t>(input.seqs[s].spec);
    }
  }
  spec_base[pad_seq] = 0;
  spec_ptrs[pad_seq] = options.pad_spec;
  std::memcpy(step.bytes.data() + step.offsets.decode_rows, plan.rows.data(),
              sizeof(kernels::DecodeRowDesc) * plan.rows.size());
  auto* items = At<kernels::DecodeWorkItem>(step, step.offsets.decode_items);
  for (int32_t i = 0; i < shape.decode_items; ++i) {
    items[i] = i < plan.total_splits() ? plan.items[i] : kernels::DecodeWorkItem{-1, 0};
  }
  std::memcpy(step.bytes.data() + step.offsets.prefill_tiles, tiles.data(),
              sizeof(kernels::PrefillTileDesc) * tiles.size());
  return step;
}

}  // namespace lockstep::cuda

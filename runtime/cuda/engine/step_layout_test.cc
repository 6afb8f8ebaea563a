#include "runtime/cuda/engine/step_layout.h"

#include <cstring>
#include <limits>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::cuda {
namespace {

using engine::ForwardInput;
using engine::ForwardRow;
using engine::SequenceKv;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Array(const PackedStep& step, size_t offset, size_t count) {
  std::vector<T> out(count);
  std::memcpy(out.data(), step.bytes.data() + offset, count * sizeof(T));
  return out;
}

std::vector<BlockId> Blocks(std::vector<int32_t> ids) {
  std::vector<BlockId> out;
  for (int32_t id : ids) out.push_back(BlockId(id));
  return out;
}

StepOptions Options() {
  StepOptions o;
  o.tokens_per_block = 4;
  o.num_blocks = 64;
  o.decode.split_tokens = 8;
  o.decode.max_splits = 4;
  o.pad_spec = 0xabc000;
  return o;
}

// seq 0: a context chunk at 10..14 (logits of its last row only); seq 1: a generation
// step verifying 2 drafts at 20..22 (all logits); seq 2: a one-token last chunk at 7.
struct MixedStep {
  std::vector<BlockId> t0 = Blocks({5, 6, 7, 8});
  std::vector<BlockId> t1 = Blocks({9, 10, 11, 12, 13, 14});
  std::vector<BlockId> t2 = Blocks({3, 2});
  std::vector<ForwardRow> rows;
  std::vector<SequenceKv> seqs;
  std::vector<int32_t> logits;

  MixedStep() {
    for (int p = 10; p < 15; ++p) rows.push_back({100 + p, p, 0});
    for (int p = 20; p < 23; ++p) rows.push_back({200 + p, p, 1});
    rows.push_back({77, 7, 2});
    seqs = {SequenceKv{t0}, SequenceKv{t1}, SequenceKv{t2}};
    logits = {4, 5, 6, 7, 8};
  }
  ForwardInput input() const { return {rows, seqs, logits}; }
};

TEST(StepLayoutTest, EagerStepPacksRowsTablesAndBothAttentionPlans) {
  const MixedStep m;
  absl::StatusOr<PackedStep> step = PackStep(m.input(), Options());
  ASSERT_THAT(step, IsOk());
  const StepShape& s = step->shape;
  EXPECT_EQ(s.rows, 9);
  EXPECT_EQ(s.logit_rows, 5);
  EXPECT_EQ(s.seqs, 4);  // three sequences and the pad sequence
  EXPECT_EQ(s.table_stride, 6);
  EXPECT_EQ(s.spec_tokens, 1);
  const StepOffsets& o = step->offsets;
  EXPECT_THAT(Array<int32_t>(*step, o.tokens, 9),
              ElementsAre(110, 111, 112, 113, 114, 220, 221, 222, 77));
  EXPECT_THAT(Array<int32_t>(*step, o.positions, 9),
              ElementsAre(10, 11, 12, 13, 14, 20, 21, 22, 7));
  EXPECT_THAT(Array<int32_t>(*step, o.kv_seqs, 9), ElementsAre(0, 0, 0, 0, 0, 1, 1, 1, 2));
  EXPECT_THAT(Array<int32_t>(*step, o.logit_rows, 5), ElementsAre(4, 5, 6, 7, 8));
  EXPECT_THAT(Array<int32_t>(*step, o.block_table, 24),
              ElementsAreArray({5, 6, 7,  8,  -1, -1, 9,  10, 11, 12, 13, 14,  //
                                3, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_THAT(Array<int32_t>(*step, o.spec_base, 4),
              ElementsAre(std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max(),
                          std::numeric_limits<int32_t>::max(), 0));
  EXPECT_EQ(Array<uint64_t>(*step, o.spec_ptrs, 4)[3], 0xabc000u);

  // Decode rows: seq 1's three rows and seq 2's one row, each at its packed row.
  ASSERT_EQ(s.decode_rows, 4);
  const auto rows = Array<kernels::DecodeRowDesc>(*step, o.decode_rows, 4);
  EXPECT_EQ(rows[0].seq, 1);
  EXPECT_EQ(rows[0].context_len, 21);
  EXPECT_EQ(rows[0].qo_row, 5);
  EXPECT_EQ(rows[2].context_len, 23);
  EXPECT_EQ(rows[2].qo_row, 7);
  EXPECT_EQ(rows[3].seq, 2);
  EXPECT_EQ(rows[3].context_len, 8);
  EXPECT_EQ(rows[3].qo_row, 8);
  // 21, 22, 23 tokens in splits of 8 (3 each); 8 tokens in one.
  EXPECT_EQ(s.decode_items, 10);
  const auto items = Array<kernels::DecodeWorkItem>(*step, o.decode_items, 10);
  EXPECT_EQ(items[9].row, 3);
  // The context chunk is one prefill tile.
  ASSERT_EQ(s.prefill_tiles, 1);
  const auto tiles = Array<kernels::PrefillTileDesc>(*step, o.prefill_tiles, 1);
  EXPECT_EQ(tiles[0].seq, 0);
  EXPECT_EQ(tiles[0].row_begin, 0);
  EXPECT_EQ(tiles[0].num_rows, 5);
  EXPECT_EQ(tiles[0].first_position, 10);
}

TEST(StepLayoutTest, OffsetsAreAlignedAndDisjoint) {
  const StepShape shape{.rows = 7,
                        .logit_rows = 3,
                        .seqs = 5,
                        .table_stride = 3,
                        .decode_rows = 5,
                        .decode_items = 9,
                        .prefill_tiles = 2};
  const StepOffsets o = LayoutStep(shape);
  const std::vector<std::pair<size_t, size_t>> arrays = {
      {o.tokens, 4 * 7},       {o.positions, 4 * 7},
      {o.kv_seqs, 4 * 7},      {o.logit_rows, 4 * 3},
      {o.block_table, 4 * 15}, {o.spec_base, 4 * 5},
      {o.spec_ptrs, 8 * 5},    {o.decode_rows, sizeof(kernels::DecodeRowDesc) * 5},
      {o.decode_items, 8 * 9}, {o.prefill_tiles, sizeof(kernels::PrefillTileDesc) * 2}};
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ(arrays[i].first % 16, 0u) << i;
    const size_t end = arrays[i].first + arrays[i].second;
    EXPECT_LE(end, i + 1 < arrays.size() ? arrays[i + 1].first : o.bytes) << i;
  }
}

TEST(StepLayoutTest, LongChunkIsCutIntoTiles) {
  std::vector<BlockId> table;
  for (int b = 0; b < 40; ++b) table.push_back(BlockId(b));
  std::vector<ForwardRow> rows;
  for (int p = 0; p < 150; ++p) rows.push_back({1, p, 0});
  const std::vector<SequenceKv> seqs = {SequenceKv{table}};
  const std::vector<int32_t> logits = {149};
  absl::StatusOr<PackedStep> step = PackStep({rows, seqs, logits}, Options());
  ASSERT_THAT(step, IsOk());
  ASSERT_EQ(step->shape.prefill_tiles, 3);
  const auto tiles = Array<kernels::PrefillTileDesc>(*step, step->offsets.prefill_tiles, 3);
  EXPECT_EQ(tiles[1].row_begin, 64);
  EXPECT_EQ(tiles[1].first_position, 64);
  EXPECT_EQ(tiles[2].num_rows, 22);
  EXPECT_EQ(step->shape.decode_rows, 0);
}

TEST(StepLayoutTest, GraphPadsTheStepToItsBucket) {
  const std::vector<BlockId> t0 = Blocks({1, 2}), t1 = Blocks({3});
  const std::vector<ForwardRow> rows = {{5, 6, 0}, {6, 7, 0}, {9, 2, 1}};
  const std::vector<SequenceKv> seqs = {SequenceKv{t0}, SequenceKv{t1}};
  const std::vector<int32_t> logits = {0, 1, 2};
  StepOptions options = Options();
  options.graph_rows = 8;
  options.graph_seqs = 9;
  options.graph_table_stride = 5;
  options.graph_max_splits = 4;
  absl::StatusOr<PackedStep> step = PackStep({rows, seqs, logits}, options);
  ASSERT_THAT(step, IsOk());
  EXPECT_EQ(step->real_rows, 3);
  EXPECT_EQ(step->real_logits, 3);
  const StepShape& s = step->shape;
  EXPECT_EQ(s, (StepShape{.rows = 8,
                          .logit_rows = 8,
                          .seqs = 9,
                          .table_stride = 5,
                          .decode_rows = 8,
                          .decode_items = 32,
                          .prefill_tiles = 0,
                          .spec_tokens = 1}));
  const StepOffsets& o = step->offsets;
  EXPECT_THAT(Array<int32_t>(*step, o.tokens, 8), ElementsAre(5, 6, 9, 0, 0, 0, 0, 0));
  EXPECT_THAT(Array<int32_t>(*step, o.kv_seqs, 8), ElementsAre(0, 0, 1, -1, -1, -1, -1, -1));
  EXPECT_THAT(Array<int32_t>(*step, o.logit_rows, 8), ElementsAre(0, 1, 2, 0, 0, 0, 0, 0));
  const auto dec = Array<kernels::DecodeRowDesc>(*step, o.decode_rows, 8);
  for (int r = 3; r < 8; ++r) {
    EXPECT_EQ(dec[r].seq, 8) << r;  // the pad sequence, the table's last row
    EXPECT_EQ(dec[r].context_len, 1) << r;
    EXPECT_EQ(dec[r].qo_row, r) << r;
  }
  const auto items = Array<kernels::DecodeWorkItem>(*step, o.decode_items, 32);
  EXPECT_EQ(items[7].row, 7);  // one split per row (all contexts <= 8 tokens)
  for (int i = 8; i < 32; ++i) EXPECT_EQ(items[i].row, -1) << i;
  EXPECT_EQ(Array<int32_t>(*step, o.spec_base, 9)[8], 0);
  EXPECT_EQ(Array<uint64_t>(*step, o.spec_ptrs, 9)[8], 0xabc000u);
  EXPECT_THAT(Array<int32_t>(*step, o.block_table, 10),
              ElementsAre(1, 2, -1, -1, -1, 3, -1, -1, -1, -1));

  // The same shape for a step of other sizes: one graph serves both.
  const std::vector<ForwardRow> one = {{4, 3, 0}};
  const std::vector<int32_t> one_logit = {0};
  absl::StatusOr<PackedStep> other =
      PackStep({one, absl::MakeConstSpan(seqs).subspan(0, 1), one_logit}, options);
  ASSERT_THAT(other, IsOk());
  EXPECT_EQ(other->shape, s);
  EXPECT_EQ(other->offsets.bytes, o.bytes);
}

TEST(StepLayoutTest, GraphRefusesWhatItCannotReplay) {
  MixedStep m;
  StepOptions options = Options();
  options.graph_rows = 16;
  options.graph_seqs = 17;
  options.graph_table_stride = 8;
  options.graph_max_splits = 4;
  EXPECT_THAT(PackStep(m.input(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prefill")));
  options.graph_rows = 4;
  options.graph_seqs = 5;
  EXPECT_THAT(PackStep(m.input(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not fit")));
}

TEST(StepLayoutTest, TablesMustCoverPositionsBelowTheSpecBase) {
  const std::vector<BlockId> short_table = Blocks({1});  // positions 0..3
  const std::vector<ForwardRow> rows = {{1, 4, 0}, {1, 5, 0}};
  const std::vector<int32_t> logits = {0, 1};
  const std::vector<SequenceKv> uncovered = {SequenceKv{short_table}};
  EXPECT_THAT(PackStep({rows, uncovered, logits}, Options()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("blocks for")));
  // From spec_base 4 on the rows live in the spec buffer: covered.
  float spec = 0;
  const std::vector<SequenceKv> spec_seqs = {SequenceKv{short_table, 4, &spec, 4}};
  absl::StatusOr<PackedStep> step = PackStep({rows, spec_seqs, logits}, Options());
  ASSERT_THAT(step, IsOk());
  EXPECT_EQ(step->shape.spec_tokens, 4);
  EXPECT_EQ(Array<int32_t>(*step, step->offsets.spec_base, 1)[0], 4);
  EXPECT_EQ(Array<uint64_t>(*step, step->offsets.spec_ptrs, 1)[0],
            reinterpret_cast<uint64_t>(&spec));

  const std::vector<SequenceKv> no_buffer = {SequenceKv{short_table, 4, nullptr, 4}};
  EXPECT_THAT(PackStep({rows, no_buffer, logits}, Options()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("missing")));

  const std::vector<BlockId> bad = Blocks({64, 2});
  const std::vector<SequenceKv> out_of_pool = {SequenceKv{bad}};
  EXPECT_THAT(PackStep({rows, out_of_pool, logits}, Options()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("block 64")));

  const std::vector<BlockId> two = Blocks({1, 2});
  const std::vector<ForwardRow> two_rows = {{1, 0, 0}, {1, 0, 1}};
  const std::vector<SequenceKv> mixed_spec = {SequenceKv{two, 0, &spec, 4},
                                              SequenceKv{two, 0, &spec, 5}};
  EXPECT_THAT(PackStep({two_rows, mixed_spec, logits}, Options()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec buffer")));
}

}  // namespace
}  // namespace lockstep::cuda

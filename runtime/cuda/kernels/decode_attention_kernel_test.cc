// GPU checks of the KV write and paged decode attention against the CPU engine's
// WriteKv and AttendRow (runtime/engine/cpu/paged_attention.h) in f32 over the same
// bf16-rounded pool, for every family's head shapes, contexts of 1 token, one block plus
// one token, odd lengths and 8k tokens, single rows and K+1 verify rows. Skips without a
// GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/decode_attention_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/attention_desc.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/decode_split_plan.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/cuda/kernels/kv_write_kernel.h"
#include "runtime/cuda/kernels/test_kv_pool.h"
#include "runtime/engine/cpu/paged_attention.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using testing::DeviceArray;
using testing::HasNaN;
using testing::RandomBf16Floats;
using testing::RelativeL2;
using testing::RoundedToBf16;
using testing::TestKvPool;
using testing::ToBf16;
using testing::ToFloat;

constexpr double kTolerance = 2e-3;
constexpr int kLayer = 1;  // of 2: the layer offset is exercised

struct Shape {
  int num_heads, kv_heads, head_dim;
};

struct Case {
  Shape shape;
  std::vector<int64_t> lens;  // per sequence, after this step's token
  int verify_rows;            // query rows per sequence (1: decode; K+1: verify)
  DecodeSplitOptions options;
  int spec_tokens = 0;  // > 0: the last positions of each sequence in a spec buffer
};

void RunCase(const Case& c, std::mt19937_64& rng) {
  const Shape& s = c.shape;
  SCOPED_TRACE(::testing::Message()
               << s.num_heads << "/" << s.kv_heads << " heads of " << s.head_dim << ", "
               << c.lens.size() << " sequences, " << c.verify_rows << " rows each, split "
               << c.options.split_tokens << " max " << c.options.max_splits);
  absl::StatusOr<std::unique_ptr<TestKvPool>> pool =
      TestKvPool::Create(s.kv_heads, s.head_dim, c.lens, rng, c.spec_tokens);
  ASSERT_TRUE(pool.ok()) << pool.status();
  const PagedKvDesc& kv = (*pool)->desc();
  engine::KvPoolView host_pool = (*pool)->host_view();

  // This step's K/V: the last verify_rows positions of each sequence, written on both.
  const int64_t kv_row = static_cast<int64_t>(s.kv_heads) * s.head_dim;
  std::vector<int32_t> seqs, positions;
  for (size_t q = 0; q < c.lens.size(); ++q) {
    for (int j = 0; j < c.verify_rows; ++j) {
      const int64_t p = c.lens[q] - c.verify_rows + j;
      if (p < 0) continue;
      seqs.push_back(static_cast<int32_t>(q));
      positions.push_back(static_cast<int32_t>(p));
    }
  }
  const int rows = static_cast<int>(seqs.size());
  const std::vector<float> k = RandomBf16Floats(rng, rows * kv_row);
  const std::vector<float> v = RandomBf16Floats(rng, rows * kv_row);
  {
    DeviceArray<Bf16> dk(ToBf16(k)), dv(ToBf16(v));
    DeviceArray<int32_t> dseqs(seqs), dpos(positions);
    ASSERT_EQ(LaunchWriteKv(kv, kLayer, dk.get(), dv.get(), kv_row, dseqs.get(), dpos.get(), rows,
                            nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  for (int r = 0; r < rows; ++r) {
    const engine::SequenceKv seq = (*pool)->host_seq(seqs[r]);
    engine::WriteKv(host_pool, seq, kLayer, positions[r], k.data() + r * kv_row,
                    v.data() + r * kv_row);
  }
  ASSERT_TRUE((*pool)->DeviceMatchesHost()) << "the KV write";

  // Attention of each row over [0, position].
  const int64_t q_row = static_cast<int64_t>(s.num_heads) * s.head_dim;
  const std::vector<float> q = RandomBf16Floats(rng, rows * q_row);
  std::vector<int64_t> context(rows);
  for (int r = 0; r < rows; ++r) context[r] = positions[r] + 1;
  absl::StatusOr<DecodeSplitPlan> plan = PlanDecodeSplits(context, seqs, c.options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  DeviceArray<Bf16> dq(ToBf16(q)), dout(rows * q_row);
  DeviceArray<DecodeRowDesc> drows(plan->rows);
  DeviceArray<DecodeWorkItem> ditems(plan->items);
  DeviceArray<float> scratch(DecodeScratchFloats(plan->total_splits(), s.num_heads, s.head_dim));
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  DecodeAttentionArgs args{.kv = kv,
                           .layer = kLayer,
                           .q = dq.get(),
                           .q_row_stride = q_row,
                           .num_heads = s.num_heads,
                           .scale = scale,
                           .rows = drows.get(),
                           .items = ditems.get(),
                           .num_rows = rows,
                           .num_items = plan->total_splits(),
                           .scratch = scratch.get(),
                           .out = dout.get(),
                           .out_row_stride = q_row};
  ASSERT_EQ(dout.Poison(), cudaSuccess);
  ASSERT_EQ(scratch.Poison(), cudaSuccess);
  ASSERT_EQ(LaunchDecodeAttention(args, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<Bf16> got_bits = dout.Download();
  const std::vector<float> got = ToFloat(got_bits);
  ASSERT_FALSE(HasNaN(got));

  const int group = s.num_heads / s.kv_heads;
  std::vector<float> scores(static_cast<size_t>(group) *
                            (1 + *std::max_element(c.lens.begin(), c.lens.end())));
  std::vector<float> ref(q_row);
  for (int r = 0; r < rows; ++r) {
    const engine::SequenceKv seq = (*pool)->host_seq(seqs[r]);
    engine::AttendRow(host_pool, seq, kLayer, q.data() + r * q_row, positions[r], s.num_heads,
                      scale, scores.data(), ref.data());
    const absl::Span<const float> row(got.data() + r * q_row, q_row);
    EXPECT_LE(RelativeL2(row, RoundedToBf16(ref)), kTolerance)
        << "row " << r << " (sequence " << seqs[r] << ", context " << context[r] << ")";
  }

  // Batch invariance: the last row planned and run alone gives the same bits.
  absl::StatusOr<DecodeSplitPlan> alone = PlanDecodeSplits(
      std::vector<int64_t>{context.back()}, std::vector<int32_t>{seqs.back()}, c.options);
  ASSERT_TRUE(alone.ok());
  DeviceArray<DecodeRowDesc> arows(alone->rows);
  DeviceArray<DecodeWorkItem> aitems(alone->items);
  DeviceArray<Bf16> aout(q_row);
  args.q = dq.get() + (rows - 1) * q_row;
  args.rows = arows.get();
  args.items = aitems.get();
  args.num_rows = 1;
  args.num_items = alone->total_splits();
  args.out = aout.get();
  ASSERT_EQ(aout.Poison(), cudaSuccess);
  ASSERT_EQ(LaunchDecodeAttention(args, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<Bf16> alone_bits = aout.Download();
  for (int64_t i = 0; i < q_row; ++i) {
    ASSERT_EQ(alone_bits[i].bits, got_bits[(rows - 1) * q_row + i].bits) << "element " << i;
  }
}

// llama-1B, llama-8B / mistral / mixtral, qwen2-7B, qwen2-1.5B, MHA, group 8 with
// head_dim 256, and an odd head_dim.
const Shape kShapes[] = {{32, 8, 64},   {32, 8, 128}, {28, 4, 128}, {12, 2, 128},
                         {16, 16, 128}, {8, 1, 256},  {6, 2, 80}};

TEST(DecodeAttentionTest, FamiliesAndOddLengths) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const Shape& shape : kShapes) {
    std::vector<int64_t> lens = {1, 17, 16, 33};
    for (int i = 0; i < 4; ++i) lens.push_back(1 + static_cast<int64_t>(rng() % 700));
    RunCase({shape, lens, 1, {.split_tokens = 64, .max_splits = 4}}, rng);
    RunCase({shape, lens, 1, {}}, rng);
    // Draft verification: K+1 = 4 rows per sequence, from the pool only and with the
    // last 3 positions in spec buffers (all of a 2-token sequence's).
    RunCase({shape, {5, 17, 300}, 4, {.split_tokens = 16, .max_splits = 64}}, rng);
    RunCase({shape, {2, 5, 17, 300}, 4, {.split_tokens = 16, .max_splits = 64}, 3}, rng);
  }
}

TEST(DecodeAttentionTest, LongContext) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  RunCase({{32, 8, 128}, {8192, 8191, 4097}, 1, {}}, rng);
}

}  // namespace
}  // namespace lockstep::cuda::kernels

// GPU checks of paged prefill / chunk attention against the CPU engine's AttendRow
// (runtime/engine/cpu/paged_attention.h) in f32 over the same bf16-rounded pool: fresh
// prompts, chunks after a cached prefix, one row, K+1 verify rows, odd lengths, an 8k
// context, and every family's head shapes. Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/prefill_attention_kernel.h"

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
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/cuda/kernels/kv_write_kernel.h"
#include "runtime/cuda/kernels/prefill_tile_plan.h"
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
constexpr int kLayer = 1;

struct Shape {
  int num_heads, kv_heads, head_dim;
};

// Sequence s holds lens[s] tokens after this step, of which the last chunk[s] are this
// step's query rows (the rest is the cached prefix).
void RunCase(const Shape& s, const std::vector<int64_t>& lens, const std::vector<int>& chunk,
             int tile_rows, std::mt19937_64& rng, int spec_tokens = 0) {
  SCOPED_TRACE(::testing::Message()
               << s.num_heads << "/" << s.kv_heads << " heads of " << s.head_dim << ", tiles of "
               << tile_rows << ", spec " << spec_tokens);
  absl::StatusOr<std::unique_ptr<TestKvPool>> pool =
      TestKvPool::Create(s.kv_heads, s.head_dim, lens, rng, spec_tokens);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<PrefillChunk> chunks;
  std::vector<int32_t> seqs, positions;
  for (size_t q = 0; q < lens.size(); ++q) {
    chunks.push_back({.seq = static_cast<int32_t>(q),
                      .row_begin = static_cast<int32_t>(seqs.size()),
                      .num_rows = chunk[q],
                      .first_position = lens[q] - chunk[q]});
    for (int i = 0; i < chunk[q]; ++i) {
      seqs.push_back(static_cast<int32_t>(q));
      positions.push_back(static_cast<int32_t>(lens[q] - chunk[q] + i));
    }
  }
  const int rows = static_cast<int>(seqs.size());
  const int64_t kv_row = static_cast<int64_t>(s.kv_heads) * s.head_dim;
  const int64_t q_row = static_cast<int64_t>(s.num_heads) * s.head_dim;
  const std::vector<float> k = RandomBf16Floats(rng, rows * kv_row);
  const std::vector<float> v = RandomBf16Floats(rng, rows * kv_row);
  const std::vector<float> q = RandomBf16Floats(rng, rows * q_row);
  engine::KvPoolView host_pool = (*pool)->host_view();
  DeviceArray<Bf16> dk(ToBf16(k)), dv(ToBf16(v)), dq(ToBf16(q)), dout(rows * q_row);
  DeviceArray<int32_t> dseqs(seqs), dpos(positions);
  ASSERT_EQ(LaunchWriteKv((*pool)->desc(), kLayer, dk.get(), dv.get(), kv_row, dseqs.get(),
                          dpos.get(), rows, nullptr),
            cudaSuccess);
  for (int r = 0; r < rows; ++r) {
    engine::WriteKv(host_pool, (*pool)->host_seq(seqs[r]), kLayer, positions[r],
                    k.data() + r * kv_row, v.data() + r * kv_row);
  }

  absl::StatusOr<std::vector<PrefillTileDesc>> tiles = PlanPrefillTiles(chunks, tile_rows);
  ASSERT_TRUE(tiles.ok()) << tiles.status();
  DeviceArray<PrefillTileDesc> dtiles(*tiles);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const PrefillAttentionArgs args{.kv = (*pool)->desc(),
                                  .layer = kLayer,
                                  .q = dq.get(),
                                  .q_row_stride = q_row,
                                  .num_heads = s.num_heads,
                                  .scale = scale,
                                  .tiles = dtiles.get(),
                                  .num_tiles = static_cast<int>(tiles->size()),
                                  .out = dout.get(),
                                  .out_row_stride = q_row};
  ASSERT_EQ(dout.Poison(), cudaSuccess);
  ASSERT_EQ(LaunchPrefillAttention(args, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = ToFloat(dout.Download());
  ASSERT_FALSE(HasNaN(got));

  const int group = s.num_heads / s.kv_heads;
  std::vector<float> scores(static_cast<size_t>(group) *
                            (1 + *std::max_element(lens.begin(), lens.end())));
  std::vector<float> ref(q_row);
  for (int r = 0; r < rows; ++r) {
    engine::AttendRow(host_pool, (*pool)->host_seq(seqs[r]), kLayer, q.data() + r * q_row,
                      positions[r], s.num_heads, scale, scores.data(), ref.data());
    EXPECT_LE(
        RelativeL2(absl::Span<const float>(got.data() + r * q_row, q_row), RoundedToBf16(ref)),
        kTolerance)
        << "row " << r << " (sequence " << seqs[r] << ", position " << positions[r] << ")";
  }
}

const Shape kShapes[] = {{32, 8, 64},   {32, 8, 128}, {28, 4, 128}, {12, 2, 128},
                         {16, 16, 128}, {8, 1, 256},  {6, 2, 80}};

TEST(PrefillAttentionTest, FamiliesChunksAndOddLengths) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const Shape& shape : kShapes) {
    // One row after a one-block prefix; a fresh 65-row prompt; a chunk after a prefix;
    // 4 verify rows; a random chunk.
    const int64_t len = 2 + static_cast<int64_t>(rng() % 400);
    const int rows = 1 + static_cast<int>(rng() % len);
    RunCase(shape, {17, 65, 300, 20, len}, {1, 65, 100, 4, rows}, kMaxPrefillTileRows, rng);
    RunCase(shape, {33, 7}, {33, 7}, 16, rng);
    // Verify rows whose last 3 positions sit in spec buffers.
    RunCase(shape, {20, 3}, {4, 3}, kMaxPrefillTileRows, rng, 3);
  }
}

TEST(PrefillAttentionTest, LongContext) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  RunCase({4, 1, 128}, {8192}, {1000}, kMaxPrefillTileRows, rng);
}

}  // namespace
}  // namespace lockstep::cuda::kernels

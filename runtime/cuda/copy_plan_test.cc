#include "runtime/cuda/copy_plan.h"

#include <cstring>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "kvcache/block_layout.h"

namespace lockstep::cuda {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;

kv::BlockLayout Layout() {
  return kv::BlockLayout{
      .num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .tokens_per_block = 4, .element_bytes = 2};
}

std::vector<kv::BlockSpan> RandomSpans(std::mt19937_64& rng, int32_t num_blocks, size_t block_bytes,
                                       int count) {
  std::vector<kv::BlockSpan> spans;
  for (int i = 0; i < count; ++i) {
    const int32_t block = static_cast<int32_t>(rng() % num_blocks);
    const size_t offset = rng() % (block_bytes + 1);
    const size_t length = rng() % (block_bytes - offset + 1);  // 0 is allowed
    spans.push_back({BlockId(block), offset, length});
  }
  return spans;
}

// Runs the plan with memcpy standing in for the kernel and the bounce buffer, checking
// every chunk against the limits. The result must equal HostBlockCopier's CopyOut.
std::vector<std::byte> GatherByPlan(const std::vector<std::byte>& slab,
                                    const std::vector<kv::BlockSpan>& spans, size_t block_bytes,
                                    ChunkLimits limits) {
  size_t total = 0;
  for (const kv::BlockSpan& s : spans) total += s.length;
  std::vector<std::byte> host(total);
  std::vector<std::byte> bounce(limits.chunk_bytes);
  std::vector<CopySegment> segments(limits.max_segments);
  ChunkPlanner planner(spans, block_bytes, limits);
  ChunkPlanner::Chunk chunk;
  size_t expected_offset = 0;
  while (planner.Next(segments.data(), &chunk)) {
    EXPECT_EQ(chunk.host_offset, expected_offset);
    EXPECT_LE(chunk.bytes, limits.chunk_bytes);
    EXPECT_GE(chunk.num_segments, 1);
    EXPECT_LE(chunk.num_segments, limits.max_segments);
    size_t staged = 0;
    for (int i = 0; i < chunk.num_segments; ++i) {
      const CopySegment& seg = segments[i];
      EXPECT_GT(seg.length, 0u);
      EXPECT_LE(seg.length, limits.max_segment_bytes);
      EXPECT_EQ(seg.staging_offset, staged);  // back to back in the bounce buffer
      std::memcpy(bounce.data() + seg.staging_offset, slab.data() + seg.slab_offset, seg.length);
      staged += seg.length;
    }
    EXPECT_EQ(staged, chunk.bytes);
    std::memcpy(host.data() + chunk.host_offset, bounce.data(), chunk.bytes);
    expected_offset += chunk.bytes;
  }
  EXPECT_EQ(expected_offset, total);
  return host;
}

TEST(ChunkLimitsTest, ZeroLimitsAreInvalid) {
  LOCKSTEP_EXPECT_OK(ChunkLimits{}.Validate());
  EXPECT_THAT((ChunkLimits{.chunk_bytes = 0}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((ChunkLimits{.max_segment_bytes = 0}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((ChunkLimits{.max_segments = 0}.Validate()),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(ChunkPlannerTest, NoSpansNoChunks) {
  std::vector<CopySegment> segments(4);
  ChunkPlanner planner({}, 64, ChunkLimits{});
  ChunkPlanner::Chunk chunk;
  EXPECT_FALSE(planner.Next(segments.data(), &chunk));
}

TEST(ChunkPlannerTest, ABigSpanIsCutIntoSegmentsAndChunks) {
  const std::vector<kv::BlockSpan> spans = {{BlockId(3), 10, 1000}};
  const ChunkLimits limits{.chunk_bytes = 256, .max_segment_bytes = 100, .max_segments = 8};
  std::vector<CopySegment> segments(limits.max_segments);
  ChunkPlanner planner(spans, /*block_bytes=*/2048, limits);
  ChunkPlanner::Chunk chunk;
  ASSERT_TRUE(planner.Next(segments.data(), &chunk));
  EXPECT_EQ(chunk.bytes, 256u);
  ASSERT_EQ(chunk.num_segments, 3);  // 100 + 100 + 56
  EXPECT_EQ(segments[0].slab_offset, 3u * 2048 + 10);
  EXPECT_EQ(segments[2].length, 56u);
  int chunks = 1;
  while (planner.Next(segments.data(), &chunk)) ++chunks;
  EXPECT_EQ(chunks, 4);  // 256 * 3 + 232
}

TEST(ChunkPlannerTest, SegmentCountClosesAChunk) {
  std::vector<kv::BlockSpan> spans;
  for (int b = 0; b < 5; ++b) spans.push_back({BlockId(b), 0, 8});
  const ChunkLimits limits{.chunk_bytes = 1024, .max_segment_bytes = 1024, .max_segments = 2};
  std::vector<CopySegment> segments(limits.max_segments);
  ChunkPlanner planner(spans, 64, limits);
  ChunkPlanner::Chunk chunk;
  std::vector<int> counts;
  while (planner.Next(segments.data(), &chunk)) counts.push_back(chunk.num_segments);
  EXPECT_EQ(counts, (std::vector<int>{2, 2, 1}));
}

TEST(ChunkPlannerTest, RandomPlansGatherWhatTheHostCopierGathers) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const kv::BlockLayout layout = Layout();
  const int32_t num_blocks = 16;
  std::vector<std::byte> slab(num_blocks * layout.BlockBytes());
  for (std::byte& b : slab) b = static_cast<std::byte>(rng());
  kv::HostBlockCopier host_copier(slab.data(), layout, num_blocks);
  for (int round = 0; round < 200; ++round) {
    const std::vector<kv::BlockSpan> spans =
        RandomSpans(rng, num_blocks, layout.BlockBytes(), 1 + static_cast<int>(rng() % 12));
    const ChunkLimits limits{.chunk_bytes = 1 + rng() % 700,
                             .max_segment_bytes = 1 + rng() % 300,
                             .max_segments = 1 + static_cast<int>(rng() % 5)};
    SCOPED_TRACE(round);
    const std::vector<std::byte> planned = GatherByPlan(slab, spans, layout.BlockBytes(), limits);
    std::vector<std::byte> expected(planned.size());
    LOCKSTEP_ASSERT_OK(host_copier.CopyOut(spans, absl::MakeSpan(expected)));
    ASSERT_EQ(planned, expected);
  }
}

}  // namespace
}  // namespace lockstep::cuda

#include "runtime/cuda/kernels/block_table_pack.h"

#include <cstdint>
#include <random>
#include <vector>

#include "common/ids.h"
#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;

using Table = std::vector<BlockId>;

std::vector<absl::Span<const BlockId>> Spans(const std::vector<Table>& tables) {
  return {tables.begin(), tables.end()};
}

TEST(BlockTablePackTest, OneBlockPlusOneToken) {
  const std::vector<Table> tables = {{BlockId(7), BlockId(2)}, {BlockId(5)}};
  absl::StatusOr<PackedBlockTable> packed =
      PackBlockTables(Spans(tables), std::vector<int64_t>{17, 1}, 16, 8);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->stride, 2);
  EXPECT_EQ(packed->table, (std::vector<int32_t>{7, 2, 5, kPadBlock}));
  // Too few blocks for 33 tokens; a block outside the pool.
  EXPECT_THAT(PackBlockTables(Spans(tables), std::vector<int64_t>{33, 1}, 16, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PackBlockTables(Spans(tables), std::vector<int64_t>{17, 1}, 16, 7).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PackBlockTables(Spans(tables), std::vector<int64_t>{17}, 16, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(BlockTablePackTest, RandomTablesWithFixedStride) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    const int tpb = 1 + static_cast<int>(rng() % 32);
    const int32_t min_stride = static_cast<int32_t>(rng() % 600);
    std::vector<Table> tables(1 + rng() % 16);
    std::vector<int64_t> tokens;
    size_t longest = 0;
    for (Table& t : tables) {
      tokens.push_back(static_cast<int64_t>(rng() % 8193));
      const size_t blocks = (tokens.back() + tpb - 1) / tpb + rng() % 2;
      for (size_t i = 0; i < blocks; ++i) t.push_back(BlockId(static_cast<int32_t>(rng() % 9000)));
      longest = std::max(longest, blocks);
    }
    absl::StatusOr<PackedBlockTable> packed =
        PackBlockTables(Spans(tables), tokens, tpb, 9000, min_stride);
    ASSERT_TRUE(packed.ok()) << packed.status();
    ASSERT_EQ(packed->stride, std::max<int32_t>(min_stride, longest));
    ASSERT_EQ(packed->table.size(), tables.size() * packed->stride);
    for (size_t s = 0; s < tables.size(); ++s) {
      for (int32_t i = 0; i < packed->stride; ++i) {
        const int32_t want =
            i < static_cast<int32_t>(tables[s].size()) ? tables[s][i].value() : kPadBlock;
        EXPECT_EQ(packed->table[s * packed->stride + i], want) << "seq " << s << " entry " << i;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

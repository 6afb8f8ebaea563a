#include "runtime/cuda/kernels/prefill_tile_plan.h"

#include <cstdint>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;
using ::testing::HasSubstr;

TEST(PrefillTilePlanTest, OneRowAndOddLengths) {
  absl::StatusOr<std::vector<PrefillTileDesc>> tiles = PlanPrefillTiles(
      std::vector<PrefillChunk>{{.seq = 3, .row_begin = 0, .num_rows = 1, .first_position = 16},
                                {.seq = 1, .row_begin = 1, .num_rows = 65, .first_position = 0}},
      64);
  ASSERT_TRUE(tiles.ok()) << tiles.status();
  ASSERT_EQ(tiles->size(), 3u);
  EXPECT_EQ((*tiles)[0].seq, 3);
  EXPECT_EQ((*tiles)[0].num_rows, 1);
  EXPECT_EQ((*tiles)[0].first_position, 16);
  EXPECT_EQ((*tiles)[1].num_rows, 64);
  EXPECT_EQ((*tiles)[2].row_begin, 65);
  EXPECT_EQ((*tiles)[2].num_rows, 1);
  EXPECT_EQ((*tiles)[2].first_position, 64);
}

TEST(PrefillTilePlanTest, RejectsBadInput) {
  EXPECT_THAT(PlanPrefillTiles(std::vector<PrefillChunk>{{.num_rows = 0}}, 64).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PlanPrefillTiles(std::vector<PrefillChunk>{{.num_rows = 1}}, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // The kernel's limit: tiles of more rows would trap on the device.
  EXPECT_THAT(PlanPrefillTiles(std::vector<PrefillChunk>{{.num_rows = 1}}, kMaxPrefillTileRows + 1)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tile_rows")));
  EXPECT_TRUE(
      PlanPrefillTiles(std::vector<PrefillChunk>{{.num_rows = 200}}, kMaxPrefillTileRows).ok());
  EXPECT_THAT(
      PlanPrefillTiles(
          std::vector<PrefillChunk>{{.num_rows = 2, .first_position = int64_t{1} << 31}}, 64)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument));
}

// Each packed row is in exactly one tile, at its own position, with its own sequence.
TEST(PrefillTilePlanTest, RandomChunksCoverEveryRowOnce) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 100; ++trial) {
    const int tile_rows = 1 + static_cast<int>(rng() % kMaxPrefillTileRows);
    std::vector<PrefillChunk> chunks;
    std::vector<int32_t> seq_of_row;
    std::vector<int64_t> position_of_row;
    for (int c = 0, n = 1 + static_cast<int>(rng() % 8); c < n; ++c) {
      PrefillChunk chunk{.seq = c,
                         .row_begin = static_cast<int32_t>(seq_of_row.size()),
                         .num_rows = 1 + static_cast<int32_t>(rng() % 300),
                         .first_position = static_cast<int64_t>(rng() % 8192)};
      for (int i = 0; i < chunk.num_rows; ++i) {
        seq_of_row.push_back(c);
        position_of_row.push_back(chunk.first_position + i);
      }
      chunks.push_back(chunk);
    }
    absl::StatusOr<std::vector<PrefillTileDesc>> tiles = PlanPrefillTiles(chunks, tile_rows);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    std::vector<int> seen(seq_of_row.size(), 0);
    for (const PrefillTileDesc& tile : *tiles) {
      ASSERT_GE(tile.num_rows, 1);
      ASSERT_LE(tile.num_rows, tile_rows);
      ASSERT_LE(tile.num_rows, kMaxPrefillTileRows);
      for (int i = 0; i < tile.num_rows; ++i) {
        const size_t row = tile.row_begin + i;
        ASSERT_LT(row, seen.size());
        ++seen[row];
        EXPECT_EQ(tile.seq, seq_of_row[row]);
        EXPECT_EQ(tile.first_position + i, position_of_row[row]);
      }
    }
    for (size_t row = 0; row < seen.size(); ++row) EXPECT_EQ(seen[row], 1) << "row " << row;
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

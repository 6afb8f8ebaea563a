// GPU checks of the device-count MoE path: the grouped GEMM's tile plan against a host
// walk of the counts, the grouped GEMM against the CPU engine's Gemm (f32: bitwise equal,
// the same fused multiply-add chain; bf16: relative L2 <= 1e-2 on bf16-rounded inputs),
// rows outside every tile left as they were, and the expert-parallel dispatch layout
// against its definition (moe_kernels.h). Skips without a GPU (gpu_test_env.h).
#include "runtime/cuda/kernels/grouped_gemm_kernel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gpu_test_env.h"
#include "runtime/cuda/kernels/bf16.h"
#include "runtime/cuda/kernels/kernel_test_util.h"
#include "runtime/cuda/kernels/moe_kernels.h"
#include "runtime/engine/cpu/gemm.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using testing::DeviceArray;
using testing::HasNaN;
using testing::RandomBf16Floats;
using testing::RelativeL2;
using testing::RoundedToBf16;
using testing::ToBf16;
using testing::ToFloat;

struct Segment {
  int begin, count, expert;
};

// The segments of `counts` ([groups][max_local]) in (group, expert) order.
std::vector<Segment> Segments(const std::vector<int32_t>& counts, int groups, int max_local,
                              int local, int group_rows) {
  std::vector<Segment> segments;
  for (int g = 0; g < groups; ++g) {
    int begin = g * group_rows;
    for (int j = 0; j < local; ++j) {
      segments.push_back({begin, counts[g * max_local + j], j});
      begin += counts[g * max_local + j];
    }
  }
  return segments;
}

// Random counts of `local` experts in `groups` groups, each group's total <= group_rows.
std::vector<int32_t> RandomCounts(std::mt19937_64& rng, int groups, int max_local, int local,
                                  int group_rows) {
  std::vector<int32_t> counts(groups * max_local, 0);
  for (int g = 0; g < groups; ++g) {
    int left = group_rows;
    for (int j = 0; j < local; ++j) {
      const int c = static_cast<int>(rng() % (left / 2 + 2));
      counts[g * max_local + j] = std::min(c, left);
      left -= counts[g * max_local + j];
    }
  }
  return counts;
}

template <typename T>
std::vector<T> Convert(const std::vector<float>& values);
template <>
std::vector<float> Convert<float>(const std::vector<float>& values) {
  return values;
}
template <>
std::vector<Bf16> Convert<Bf16>(const std::vector<float>& values) {
  return ToBf16(values);
}
std::vector<float> Widen(const std::vector<float>& values) { return values; }
std::vector<float> Widen(const std::vector<Bf16>& values) { return ToFloat(values); }

template <typename T>
void RunGroupedGemm(std::mt19937_64& rng, int groups, int local, int group_rows, int n, int k) {
  SCOPED_TRACE(::testing::Message()
               << groups << " groups x " << local << " experts, " << group_rows << " rows each, n "
               << n << ", k " << k << ", " << sizeof(T) * 8 << "-bit");
  const int max_local = local + 1;  // a padded count row, as ranks with fewer experts have
  const int total = groups * group_rows;
  const std::vector<int32_t> counts = RandomCounts(rng, groups, max_local, local, group_rows);
  const std::vector<Segment> segments = Segments(counts, groups, max_local, local, group_rows);
  const int max_tiles = MaxGroupedGemmTiles(total, groups, local);

  DeviceArray<int32_t> dcounts(counts);
  DeviceArray<GroupedGemmTile> dtiles(max_tiles);
  ASSERT_EQ(LaunchGroupedGemmPlan(dcounts.get(), groups, max_local, local, group_rows, dtiles.get(),
                                  max_tiles, nullptr),
            cudaSuccess);
  // The plan: every segment's rows in tiles of at most kGroupedGemmTileRows, in order.
  const std::vector<GroupedGemmTile> tiles = dtiles.Download();
  ASSERT_EQ(static_cast<int>(tiles.size()), max_tiles);
  size_t t = 0;
  for (const Segment& s : segments) {
    for (int r = 0; r < s.count; r += kGroupedGemmTileRows, ++t) {
      ASSERT_LT(t, tiles.size());
      EXPECT_EQ(tiles[t].row_begin, s.begin + r);
      EXPECT_EQ(tiles[t].rows, std::min(kGroupedGemmTileRows, s.count - r));
      EXPECT_EQ(tiles[t].expert, s.expert);
    }
  }
  for (; t < tiles.size(); ++t) EXPECT_EQ(tiles[t].expert, -1);

  const std::vector<float> x = RandomBf16Floats(rng, static_cast<size_t>(total) * k);
  std::vector<std::vector<float>> w;
  std::vector<std::unique_ptr<DeviceArray<T>>> dw;
  std::vector<const T*> pointers;
  for (int j = 0; j < local; ++j) {
    w.push_back(RandomBf16Floats(rng, static_cast<size_t>(n) * k, 0.1f));
    dw.push_back(std::make_unique<DeviceArray<T>>(Convert<T>(w.back())));
    pointers.push_back(dw.back()->get());
  }
  DeviceArray<T> dx(Convert<T>(x)), dy(static_cast<size_t>(total) * n);
  DeviceArray<const T*> dpointers(pointers);
  ASSERT_EQ(dy.Poison(), cudaSuccess);
  ASSERT_EQ(LaunchGroupedGemm(dx.get(), dtiles.get(), max_tiles, dpointers.get(), n, k, dy.get(),
                              nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y = Widen(dy.Download());
  std::vector<bool> covered(total, false);
  for (const Segment& s : segments) {
    if (s.count == 0) continue;
    std::vector<float> ref(static_cast<size_t>(s.count) * n);
    engine::Gemm(x.data() + static_cast<size_t>(s.begin) * k, s.count, k,
                 engine::PackedMatrix::Pack(w[s.expert], n, k), nullptr, ref.data(), n, nullptr);
    const std::vector<float> got(y.begin() + static_cast<size_t>(s.begin) * n,
                                 y.begin() + static_cast<size_t>(s.begin + s.count) * n);
    ASSERT_FALSE(HasNaN(got)) << "segment at " << s.begin;
    if constexpr (sizeof(T) == 4) {
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0)
          << "segment at " << s.begin << " differs from the CPU Gemm's bits";
    } else {
      EXPECT_LE(RelativeL2(got, RoundedToBf16(ref)), 1e-2) << "segment at " << s.begin;
    }
    for (int r = s.begin; r < s.begin + s.count; ++r) covered[r] = true;
  }
  for (int r = 0; r < total; ++r) {
    if (covered[r]) continue;
    for (int c = 0; c < n; ++c) {
      ASSERT_TRUE(std::isnan(y[static_cast<size_t>(r) * n + c])) << "row " << r << " was written";
    }
  }
}

TEST(GroupedGemmKernelTest, MatchesTheCpuGemmPerSegment) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  // One rank with 8 experts; 4 source ranks x 2 local experts; odd sizes; one row.
  RunGroupedGemm<float>(rng, 1, 8, 150, 192, 128);
  RunGroupedGemm<Bf16>(rng, 1, 8, 150, 192, 128);
  RunGroupedGemm<float>(rng, 4, 2, 70, 100, 77);
  RunGroupedGemm<Bf16>(rng, 4, 2, 70, 100, 77);
  RunGroupedGemm<float>(rng, 1, 1, 1, 65, 33);
}

TEST(GroupedGemmKernelTest, DispatchLayoutPlacesEachRanksRowsInItsCapacity) {
  LOCKSTEP_SKIP_WITHOUT_GPU();
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (const int world : {1, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    const int experts = 10, k = 2, rows = 37;
    const int entries = rows * k;
    // Expert-sorted offsets of random counts.
    std::vector<int32_t> offsets(experts + 1, 0);
    std::vector<int32_t> count(experts, 0);
    for (int i = 0; i < entries; ++i) ++count[rng() % experts];
    for (int e = 0; e < experts; ++e) offsets[e + 1] = offsets[e] + count[e];
    auto first = [&](int p) { return static_cast<int>(static_cast<int64_t>(p) * experts / world); };
    int max_local = 0;
    for (int p = 0; p < world; ++p) max_local = std::max(max_local, first(p + 1) - first(p));
    const int capacity = rows * std::min(k, max_local);
    DeviceArray<int32_t> doffsets(offsets), ddest(entries), dcounts(world * max_local);
    ASSERT_EQ(ddest.Poison(), cudaSuccess);
    ASSERT_EQ(LaunchMoeDispatchLayout(doffsets.get(), experts, world, capacity, max_local, entries,
                                      ddest.get(), dcounts.get(), nullptr),
              cudaSuccess);
    const std::vector<int32_t> dest = ddest.Download();
    const std::vector<int32_t> counts = dcounts.Download();
    for (int p = 0; p < world; ++p) {
      for (int j = 0; j < max_local; ++j) {
        const int e = first(p) + j;
        EXPECT_EQ(counts[p * max_local + j], e < first(p + 1) ? count[e] : 0) << p << "/" << j;
      }
      for (int e = first(p); e < first(p + 1); ++e) {
        for (int s = offsets[e]; s < offsets[e + 1]; ++s) {
          EXPECT_EQ(dest[s], p * capacity + s - offsets[first(p)]) << "slot " << s;
          EXPECT_LT(dest[s] - p * capacity, capacity) << "slot " << s;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

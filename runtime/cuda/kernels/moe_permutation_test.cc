#include "runtime/cuda/kernels/moe_permutation.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "common/testing/seed.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::StatusIs;
using ::lockstep::testing::TestSeed;

TEST(MoePermutationTest, RejectsBadInput) {
  EXPECT_THAT(PermuteToExperts(std::vector<int32_t>{0, 1, 2}, 2, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PermuteToExperts(std::vector<int32_t>{0, 4}, 2, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PermuteToExperts(std::vector<int32_t>{0, -1}, 1, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(MoePermutationTest, OneRow) {
  absl::StatusOr<MoePermutation> perm = PermuteToExperts(std::vector<int32_t>{1, 3}, 2, 4);
  ASSERT_TRUE(perm.ok()) << perm.status();
  EXPECT_EQ(perm->expert_offsets, (std::vector<int32_t>{0, 0, 1, 1, 2}));
  EXPECT_EQ(perm->entry_of_slot, (std::vector<int32_t>{0, 1}));
}

// Against a stable sort of the entries by (expert, entry index).
TEST(MoePermutationTest, MatchesStableSort) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 100; ++trial) {
    const int num_experts = 1 + static_cast<int>(rng() % 130);
    const int k = 1 + static_cast<int>(rng() % std::min(8, num_experts));
    const int rows = 1 + static_cast<int>(rng() % 257);
    std::vector<int32_t> experts;
    for (int r = 0; r < rows; ++r) {
      // k distinct experts in ascending order, like the router's output.
      std::vector<int32_t> all(num_experts);
      for (int e = 0; e < num_experts; ++e) all[e] = e;
      std::shuffle(all.begin(), all.end(), rng);
      std::sort(all.begin(), all.begin() + k);
      experts.insert(experts.end(), all.begin(), all.begin() + k);
    }
    absl::StatusOr<MoePermutation> perm = PermuteToExperts(experts, k, num_experts);
    ASSERT_TRUE(perm.ok()) << perm.status();
    std::vector<std::tuple<int32_t, int32_t>> ref;
    for (size_t i = 0; i < experts.size(); ++i) ref.emplace_back(experts[i], i);
    std::sort(ref.begin(), ref.end());
    ASSERT_EQ(perm->entry_of_slot.size(), ref.size());
    for (size_t s = 0; s < ref.size(); ++s) {
      EXPECT_EQ(perm->entry_of_slot[s], std::get<1>(ref[s])) << "slot " << s;
      EXPECT_EQ(perm->slot_of_entry[perm->entry_of_slot[s]], static_cast<int32_t>(s));
    }
    for (int e = 0; e < num_experts; ++e) {
      const auto count = std::count(experts.begin(), experts.end(), e);
      EXPECT_EQ(perm->expert_offsets[e + 1] - perm->expert_offsets[e], count) << "expert " << e;
    }
    EXPECT_EQ(perm->expert_offsets[num_experts], static_cast<int32_t>(experts.size()));
  }
}

}  // namespace
}  // namespace lockstep::cuda::kernels

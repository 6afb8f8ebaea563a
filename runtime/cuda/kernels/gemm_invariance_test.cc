#include "runtime/cuda/kernels/gemm_invariance.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::cuda::kernels {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;

// An injected non-invariant candidate (and a split-K one) are passed over, each named.
TEST(GemmInvarianceTest, FallsBackPastNonInvariantCandidates) {
  std::vector<int> checked;
  std::vector<std::string> refused;
  const absl::StatusOr<int> pick = FirstInvariantCandidate(
      0, 5, [](int i) { return i != 1; },
      [&](int i) -> absl::StatusOr<bool> {
        checked.push_back(i);
        return i >= 3;
      },
      &refused);
  ASSERT_THAT(pick, IsOk());
  EXPECT_EQ(*pick, 3);
  EXPECT_THAT(checked, ElementsAre(0, 2, 3));
  EXPECT_THAT(refused, ElementsAre("candidate 0: row 0 differs between M = 1 and the batch",
                                   "candidate 1: split-K",
                                   "candidate 2: row 0 differs between M = 1 and the batch"));
}

TEST(GemmInvarianceTest, TheFirstWantedCandidateWhenItHolds) {
  std::vector<std::string> refused;
  const absl::StatusOr<int> pick = FirstInvariantCandidate(
      2, 8, [](int) { return true; }, [](int) -> absl::StatusOr<bool> { return true; }, &refused);
  ASSERT_THAT(pick, IsOk());
  EXPECT_EQ(*pick, 2);
  EXPECT_TRUE(refused.empty());
}

TEST(GemmInvarianceTest, NoneOrAnErrorIsAnError) {
  std::vector<std::string> refused;
  EXPECT_THAT(FirstInvariantCandidate(
                  0, 3, [](int) { return true; }, [](int) -> absl::StatusOr<bool> { return false; },
                  &refused),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(refused.size(), 3u);
  EXPECT_THAT(
      FirstInvariantCandidate(
          0, 3, [](int) { return true; },
          [](int) -> absl::StatusOr<bool> { return absl::InternalError("cublas"); }, &refused),
      StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace lockstep::cuda::kernels

// RouteTopK (moe_route.h): the top-k by probability in ascending id order, ties to the
// lower id, renormalisation, and a defined choice for rows whose probabilities are NaN
// (a NaN or infinite router logit): experts 0..k-1, never an id out of range.
#include "runtime/engine/cpu/moe_route.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::engine {
namespace {

struct Route {
  std::vector<int> experts;
  std::vector<float> weights;
};

Route RouteOf(const std::vector<float>& logits, int k, bool renormalize) {
  Route r{std::vector<int>(k, -7), std::vector<float>(k, -7.0f)};
  std::vector<float> probs(logits.size());
  RouteTopK(logits.data(), static_cast<int>(logits.size()), k, renormalize, r.experts.data(),
            r.weights.data(), probs.data());
  return r;
}

TEST(MoeRouteTest, TopKInAscendingIdOrder) {
  const Route r = RouteOf({0.1f, 3.0f, -1.0f, 2.0f, 2.5f}, 3, false);
  EXPECT_EQ(r.experts, (std::vector<int>{1, 3, 4}));
  EXPECT_GT(r.weights[0], r.weights[2]);
  EXPECT_GT(r.weights[2], r.weights[1]);
  const Route renormalized = RouteOf({0.1f, 3.0f, -1.0f, 2.0f, 2.5f}, 3, true);
  EXPECT_NEAR(renormalized.weights[0] + renormalized.weights[1] + renormalized.weights[2], 1.0f,
              1e-6f);
}

TEST(MoeRouteTest, TiesGoToTheLowerId) {
  EXPECT_EQ(RouteOf({1.0f, 2.0f, 2.0f, 2.0f}, 2, false).experts, (std::vector<int>{1, 2}));
  EXPECT_EQ(RouteOf(std::vector<float>(6, 0.5f), 3, true).experts, (std::vector<int>{0, 1, 2}));
}

// Any NaN or infinite logit makes every probability NaN: the choice is still k distinct
// experts in range (0..k-1, as for an exact tie), with NaN weights.
TEST(MoeRouteTest, NanProbabilitiesPickTheLowestIds) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      {1.0f, 2.0f, nan, 4.0f, 3.0f},   // one NaN
      {nan, nan, nan, nan, nan},       // all NaN
      {0.0f, inf, 1.0f, 2.0f, 3.0f},   // +inf: inf - inf is NaN
      {-inf, -inf, -inf, -inf, -inf},  // all -inf
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    for (const bool renormalize : {false, true}) {
      const Route r = RouteOf(rows[i], 3, renormalize);
      EXPECT_EQ(r.experts, (std::vector<int>{0, 1, 2})) << "row " << i;
      for (float w : r.weights) EXPECT_TRUE(std::isnan(w)) << "row " << i;
    }
  }
  // k = the number of experts: each exactly once.
  EXPECT_EQ(RouteOf({nan, 1.0f, 2.0f}, 3, false).experts, (std::vector<int>{0, 1, 2}));
}

// The same in rows wide enough for the vectorised softmax (8 lanes, then a tail): a
// NaN in a vector lane makes every probability NaN too.
TEST(MoeRouteTest, NanProbabilitiesPickTheLowestIdsInWideRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const int at : {0, 5, 7, 8, 15, 18}) {
    std::vector<float> row(19);
    for (int e = 0; e < 19; ++e) row[e] = static_cast<float>(e % 7) - 3.0f;
    row[at] = nan;
    const Route r = RouteOf(row, 3, false);
    EXPECT_EQ(r.experts, (std::vector<int>{0, 1, 2})) << "NaN at " << at;
    for (float w : r.weights) EXPECT_TRUE(std::isnan(w)) << "NaN at " << at;
  }
}

}  // namespace
}  // namespace lockstep::engine

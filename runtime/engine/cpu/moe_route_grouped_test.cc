// RouteGrouped (moe_route.h), the DeepSeek-V3 family's routing: sigmoid scores, the
// correction bias for choosing only, group-limited choice, renormalisation and scaling.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/cpu/moe_route.h"

namespace lockstep::engine {
namespace {

struct Route {
  std::vector<int> experts;
  std::vector<float> weights;
};

Route RouteOf(const std::vector<float>& logits, const std::vector<float>& bias,
              const GroupedRouting& rule) {
  Route r{std::vector<int>(rule.k, -7), std::vector<float>(rule.k, -7.0f)};
  std::vector<float> scratch(3 * logits.size() + 2 * rule.n_group);
  RouteGrouped(logits.data(), bias.empty() ? nullptr : bias.data(), rule, r.experts.data(),
               r.weights.data(), scratch.data());
  return r;
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(RouteGroupedTest, SigmoidTopKScaledNotRenormalised) {
  const GroupedRouting rule{.num_experts = 4, .k = 2, .renormalize = false, .scaling = 2.0f};
  const Route r = RouteOf({0.5f, -1.0f, 2.0f, 0.0f}, {}, rule);
  EXPECT_EQ(r.experts, (std::vector<int>{0, 2}));
  EXPECT_NEAR(r.weights[0], 2.0f * Sigmoid(0.5f), 1e-6);
  EXPECT_NEAR(r.weights[1], 2.0f * Sigmoid(2.0f), 1e-6);
}

TEST(RouteGroupedTest, RenormalisedThenScaled) {
  const GroupedRouting rule{.num_experts = 4, .k = 2, .renormalize = true, .scaling = 2.5f};
  const Route r = RouteOf({0.5f, -1.0f, 2.0f, 0.0f}, {}, rule);
  const float sum = Sigmoid(0.5f) + Sigmoid(2.0f);
  EXPECT_NEAR(r.weights[0], 2.5f * Sigmoid(0.5f) / sum, 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5f * Sigmoid(2.0f) / sum, 1e-6);
}

// The bias moves expert 3 into the top 2, but its weight is its unbiased score.
TEST(RouteGroupedTest, BiasChoosesButDoesNotWeight) {
  const GroupedRouting rule{.num_experts = 4, .k = 2, .renormalize = false};
  const Route r = RouteOf({0.5f, -1.0f, 2.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.3f}, rule);
  EXPECT_EQ(r.experts, (std::vector<int>{2, 3}));
  EXPECT_NEAR(r.weights[1], Sigmoid(0.0f), 1e-6);
}

// Groups {0,1} {2,3} {4,5} {6,7}; sums of each group's top 2 decide: the single best
// expert (7) is in a group whose pair sums lower than groups 0 and 1's.
TEST(RouteGroupedTest, OnlyTheBestGroupsAreEligible) {
  const GroupedRouting rule{
      .num_experts = 8, .k = 2, .n_group = 4, .topk_group = 2, .renormalize = false};
  const std::vector<float> logits = {1.0f, 1.0f, 0.8f, 0.9f, -3.0f, -3.0f, 3.0f, -5.0f};
  const Route r = RouteOf(logits, {}, rule);
  EXPECT_EQ(r.experts, (std::vector<int>{0, 1}));
  // With every group eligible, expert 6 is chosen.
  const GroupedRouting all{
      .num_experts = 8, .k = 2, .n_group = 4, .topk_group = 4, .renormalize = false};
  EXPECT_EQ(RouteOf(logits, {}, all).experts, (std::vector<int>{0, 6}));
  // The bias takes part in the group scores (group 3 now leads) and in the choice
  // (expert 7 is chosen), not in the weights.
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0, 0, 1.5f};
  const Route biased = RouteOf(logits, bias, rule);
  EXPECT_EQ(biased.experts, (std::vector<int>{6, 7}));
  EXPECT_NEAR(biased.weights[1], Sigmoid(-5.0f), 1e-6);
}

// Expert 1's biased score is negative (0.5 - 1 = -0.5) but its group is the eligible
// one (0.9 - 0.5 = 0.4 against 0.3 + 0.05): it is chosen before experts 2 and 3, whose
// group is not (masking the ineligible with 0 instead of below everything would
// choose expert 2).
TEST(RouteGroupedTest, NegativeChoiceScoresStayEligible) {
  const GroupedRouting rule{
      .num_experts = 4, .k = 2, .n_group = 2, .topk_group = 1, .renormalize = false};
  const std::vector<float> logits = {std::log(0.9f / 0.1f), 0.0f, std::log(0.3f / 0.7f),
                                     std::log(0.05f / 0.95f)};
  const Route r = RouteOf(logits, {0.0f, -1.0f, 0.0f, 0.0f}, rule);
  EXPECT_EQ(r.experts, (std::vector<int>{0, 1}));
  EXPECT_NEAR(r.weights[1], 0.5f, 1e-6);
}

TEST(RouteGroupedTest, SoftmaxScoring) {
  const GroupedRouting rule{.num_experts = 3, .k = 1, .sigmoid = false, .renormalize = false};
  const Route r = RouteOf({0.0f, 1.0f, 0.0f}, {}, rule);
  EXPECT_EQ(r.experts, (std::vector<int>{1}));
  const float e = std::exp(1.0f);
  EXPECT_NEAR(r.weights[0], e / (e + 2.0f), 1e-6);
}

}  // namespace
}  // namespace lockstep::engine

// The teacher-forced comparison the GPU checks use (testing/forward_compare.h), run here
// with the CPU transformer on both sides: every family's tiny model loads, and the
// comparison finds no difference; a perturbed candidate is caught.
#include "runtime/engine/testing/forward_compare.h"

#include <memory>
#include <string>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/moe.h"
#include "runtime/engine/safetensors.h"
#include "runtime/engine/testing/test_models.h"
#include "runtime/engine/transformer.h"
#include "runtime/engine/weights.h"

namespace lockstep::engine::testing {
namespace {

using ::lockstep::testing::IsOk;

constexpr int kBlocks = 64;

TEST(ForwardCompareTest, TheCpuTransformerAgreesWithItselfOnEveryFamily) {
  for (const char* family : kModelFamilies) {
    SCOPED_TRACE(family);
    const std::string dir = FamilyModelDir(family);
    absl::StatusOr<std::unique_ptr<Transformer>> a = Transformer::Load(dir, "a", ExpertGroup{});
    absl::StatusOr<std::unique_ptr<Transformer>> b = Transformer::Load(dir, "b", ExpertGroup{});
    ASSERT_THAT(a, IsOk());
    ASSERT_THAT(b, IsOk());
    HostPool pool_a((*a)->Layout(8), kBlocks, 1);
    HostPool pool_b((*b)->Layout(8), kBlocks, 2);
    const auto prompts = RandomPrompts({19, 3, 40}, (*a)->config().vocab_size, 7);
    absl::StatusOr<CompareReport> report =
        CompareForwards(**a, pool_a, **b, pool_b.view(), prompts, CompareOptions{});
    ASSERT_THAT(report, IsOk());
    // 3 prefill rows, 6 decode steps of 3, one verification of 3 x 4.
    EXPECT_EQ(report->rows, 3 + 6 * 3 + 12) << report->ToString();
    EXPECT_EQ(report->worst_rel_l2, 0.0) << report->ToString();
    EXPECT_EQ(report->argmax_mismatches, 0) << report->ToString();
  }
}

TEST(ForwardCompareTest, AnotherModelIsCaught) {
  absl::StatusOr<std::unique_ptr<Transformer>> a =
      Transformer::Load(FamilyModelDir("llama", 1), "a", ExpertGroup{});
  absl::StatusOr<std::unique_ptr<Transformer>> b =
      Transformer::Load(FamilyModelDir("mistral", 2), "b", ExpertGroup{});
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  HostPool pool_a((*a)->Layout(8), kBlocks, 1);
  HostPool pool_b((*b)->Layout(8), kBlocks, 1);
  absl::StatusOr<CompareReport> report =
      CompareForwards(**a, pool_a, **b, pool_b.view(),
                      RandomPrompts({12, 9}, (*a)->config().vocab_size, 3), CompareOptions{});
  ASSERT_THAT(report, IsOk());
  EXPECT_GT(report->worst_rel_l2, 0.1) << report->ToString();
}

}  // namespace
}  // namespace lockstep::engine::testing

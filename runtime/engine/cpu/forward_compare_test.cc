// The teacher-forced comparison the GPU checks use (testing/forward_compare.h), run here
// with the CPU transformer on both sides: every family's tiny model loads, and the
// comparison finds no difference; a perturbed candidate is caught.
#include "runtime/engine/cpu/testing/forward_compare.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/engine/cpu/moe.h"
#include "runtime/engine/cpu/testing/test_models.h"
#include "runtime/engine/cpu/transformer.h"
#include "runtime/engine/cpu/weights.h"
#include "runtime/engine/model/safetensors.h"

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
    EXPECT_EQ(report->first_low_margin_position.size(), 3u);
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

// A model whose logits are a function of (sequence, position): the top token is
// (position + sequence) % vocab at 10, the others 0, except in `close` rows, where the
// next token trails the top by the row's margin; from swap_from[sequence] on, the next
// token is on top instead (the argmax differs from a model without the swap). `noise`
// is added to every logit with alternating signs (a candidate's rounding error).
class ScriptedModel final : public ForwardModel {
 public:
  struct Close {
    int seq;
    int64_t position;
    float margin;
  };
  ScriptedModel(std::vector<Close> close, std::vector<int64_t> swap_from, float noise = 0.0f)
      : close_(std::move(close)), swap_from_(std::move(swap_from)), noise_(noise) {
    config_.vocab_size = 8;
    config_.num_layers = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 1;
    config_.max_position = 1024;
  }
  const ModelConfig& config() const override { return config_; }
  kv::BlockLayout Layout(int tokens_per_block) const override {
    return kv::BlockLayout{1, 1, 1, tokens_per_block};
  }
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const KvPoolView& /*pool*/,
                                       Arena& arena, ThreadPool* /*threads*/) const override {
    const int vocab = config_.vocab_size;
    float* logits = arena.Alloc<float>(input.logit_rows.size() * vocab);
    for (size_t j = 0; j < input.logit_rows.size(); ++j) {
      const ForwardRow& row = input.rows[input.logit_rows[j]];
      float* out = logits + j * vocab;
      std::fill(out, out + vocab, 0.0f);
      const int top = static_cast<int>((row.position + row.seq) % vocab);
      const int next = (top + 1) % vocab;
      out[top] = 10.0f;
      for (const Close& c : close_) {
        if (c.seq == row.seq && c.position == row.position) out[next] = 10.0f - c.margin;
      }
      if (row.position >= swap_from_[row.seq]) {
        out[top] = 5.0f;
        out[next] = 10.0f;
      }
      for (int i = 0; i < vocab; ++i) out[i] += i % 2 == 0 ? noise_ : -noise_;
    }
    return logits;
  }
  void CopyKv(const KvPoolView&, const SequenceKv&, const SequenceKv&, int64_t,
              int64_t) const override {}
  int collectives_per_forward() const override { return 0; }

 private:
  ModelConfig config_;
  std::vector<Close> close_;
  std::vector<int64_t> swap_from_;
  float noise_;
};

constexpr int64_t kNever = 1 << 20;

// Runs the comparison of `reference` and `candidate` on prompts of 5 and 9 tokens:
// sequence 0's logit rows are at positions 4 (prefill), 5..10 (decode) and 11..14
// (verify); sequence 1's at 8, 9..14 and 15..18.
CompareReport Compare(const ScriptedModel& reference, const ScriptedModel& candidate) {
  HostPool pool_a(reference.Layout(8), kBlocks, 1);
  HostPool pool_b(reference.Layout(8), kBlocks, 2);
  absl::StatusOr<CompareReport> report = CompareForwards(
      reference, pool_a, candidate, pool_b.view(), RandomPrompts({5, 9}, 8, 1), CompareOptions{});
  EXPECT_THAT(report, IsOk());
  return report.ok() ? *report : CompareReport{};
}

// The greedy rule is relative to the row's error and per sequence: with a candidate
// 0.01 off on every logit the threshold is 12 x 0.01, so sequence 0's margin of 0.005 at
// position 7 is close (a divergence after it is no mismatch) and sequence 1's margin of
// 0.5 at position 9 is not (a divergence after it is).
TEST(ForwardCompareTest, TheMarginRuleFollowsTheRowsErrorPerSequence) {
  const std::vector<ScriptedModel::Close> close = {{0, 7, 0.005f}, {1, 9, 0.5f}};
  const ScriptedModel reference(close, {kNever, kNever});
  {
    const CompareReport report = Compare(reference, ScriptedModel(close, {8, kNever}, 0.01f));
    EXPECT_EQ(report.first_low_margin_position, (std::vector<int64_t>{7, -1})) << report.ToString();
    EXPECT_EQ(report.argmax_mismatches, 0) << report.ToString();
    EXPECT_NEAR(report.largest_threshold, 0.12, 1e-6) << report.ToString();
  }
  {
    // The swap moves two logits of a row, not its median error: still caught.
    const CompareReport report = Compare(reference, ScriptedModel(close, {kNever, 12}, 0.01f));
    EXPECT_EQ(report.argmax_mismatches, 7) << report.ToString();  // 12..14, 15..18
    EXPECT_EQ(report.first_mismatch_sequence, 1) << report.ToString();
    EXPECT_EQ(report.first_mismatch_position, 12) << report.ToString();
  }
}

// Not flaky: a candidate 0.1 off everywhere (bf16-like) may flip sequence 1's margin of
// 0.5 (an absolute 1e-2 rule would count that as a mismatch); not blind: an exact
// candidate is held to every margin above zero.
TEST(ForwardCompareTest, TheMarginRuleScalesWithTheNoise) {
  const std::vector<ScriptedModel::Close> close = {{0, 7, 0.005f}, {1, 9, 0.5f}};
  const ScriptedModel reference(close, {kNever, kNever});
  {
    const CompareReport report = Compare(reference, ScriptedModel(close, {kNever, 12}, 0.1f));
    EXPECT_EQ(report.first_low_margin_position, (std::vector<int64_t>{7, 9})) << report.ToString();
    EXPECT_EQ(report.argmax_mismatches, 0) << report.ToString();
  }
  {
    const CompareReport report = Compare(reference, ScriptedModel(close, {8, kNever}));
    EXPECT_EQ(report.first_low_margin_position, (std::vector<int64_t>{-1, -1}))
        << report.ToString();
    EXPECT_EQ(report.argmax_mismatches, 7) << report.ToString();  // 8..10, 11..14
  }
}

// A one-layer MoE model for the routing rule: logits as a fixed table, router logits over
// 8 experts (k = 1) of {2, 1, 0.5, 0, ...} per row, with expert 1 at 2 - 0.01 (a near
// tie) at sequence 0 position 2. A candidate adds `noise` to every router logit
// (up on odd experts, down on even ones) and swaps experts 0 and 1 at the rows in `swap`.
class RoutedModel final : public ForwardModel {
 public:
  RoutedModel(RouterTrace& trace, float noise, std::vector<std::pair<int, int64_t>> swap)
      : trace_(trace), noise_(noise), swap_(std::move(swap)) {
    config_.vocab_size = 8;
    config_.num_layers = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 1;
    config_.max_position = 1024;
    config_.num_experts = 8;
    config_.num_experts_per_tok = 1;
  }
  const ModelConfig& config() const override { return config_; }
  kv::BlockLayout Layout(int tokens_per_block) const override {
    return kv::BlockLayout{1, 1, 1, tokens_per_block};
  }
  absl::StatusOr<const float*> Forward(const ForwardInput& input, const KvPoolView& /*pool*/,
                                       Arena& arena, ThreadPool* /*threads*/) const override {
    std::vector<float> router;
    for (const ForwardRow& row : input.rows) {
      float r[8] = {2.0f, 1.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      if (row.seq == 0 && row.position == 2) r[1] = 1.99f;
      for (const auto& [seq, position] : swap_) {
        if (row.seq == seq && row.position == position) std::swap(r[0], r[1]);
      }
      for (int e = 0; e < 8; ++e) router.push_back(r[e] + (e % 2 == 1 ? noise_ : -noise_));
    }
    trace_.Record(0, router.data(), static_cast<int>(input.rows.size()), 8);
    float* logits = arena.Alloc<float>(input.logit_rows.size() * 8);
    for (size_t j = 0; j < input.logit_rows.size() * 8; ++j) logits[j] = j % 8 == 3 ? 1.0f : 0.0f;
    return logits;
  }
  void CopyKv(const KvPoolView&, const SequenceKv&, const SequenceKv&, int64_t,
              int64_t) const override {}
  int collectives_per_forward() const override { return 0; }

 private:
  ModelConfig config_;
  RouterTrace& trace_;
  const float noise_;
  const std::vector<std::pair<int, int64_t>> swap_;
};

absl::StatusOr<CompareReport> CompareRouting(float noise,
                                             std::vector<std::pair<int, int64_t>> swap) {
  RouterTrace reference_trace, candidate_trace;
  const RoutedModel reference(reference_trace, 0.0f, {});
  const RoutedModel candidate(candidate_trace, noise, std::move(swap));
  HostPool pool_a(reference.Layout(8), kBlocks, 1);
  HostPool pool_b(reference.Layout(8), kBlocks, 2);
  CompareOptions options;
  options.reference_router = &reference_trace;
  options.candidate_router = &candidate_trace;
  return CompareForwards(reference, pool_a, candidate, pool_b.view(), RandomPrompts({5, 9}, 8, 1),
                         options);
}

// With a candidate 0.01 off on every router logit the tie threshold is 8 x 0.01: the
// flip at the 0.01 gap is excused, the one at a gap of 1 is a mismatch; the ForcedRouting
// a device model would use instead is the reference's choice.
TEST(ForwardCompareTest, TheRoutingRuleExcusesNearTiesOnly) {
  absl::StatusOr<CompareReport> report = CompareRouting(0.01f, {{0, 2}, {1, 3}});
  ASSERT_THAT(report, IsOk());
  // Every forward row of the 8 forwards: 14 prompt rows, 6 x 2 decode, 2 x 4 verify.
  EXPECT_EQ(report->routing_rows, 14 + 12 + 8) << report->ToString();
  EXPECT_EQ(report->routing_flips_excused, 1) << report->ToString();
  EXPECT_EQ(report->routing_mismatches, 1) << report->ToString();
  EXPECT_EQ(report->first_routing_mismatch_layer, 0) << report->ToString();
  EXPECT_EQ(report->first_routing_mismatch_sequence, 1) << report->ToString();
  EXPECT_EQ(report->first_routing_mismatch_position, 3) << report->ToString();
  EXPECT_NEAR(report->largest_routing_threshold, 0.08, 1e-6) << report->ToString();
  EXPECT_GT(report->worst_router_rel_l2, 0.0) << report->ToString();

  RouterTrace trace;
  const float logits[] = {0.0f, 3.0f, 1.0f, 2.0f, 5.0f, 4.0f, 0.0f, 0.0f};
  trace.Record(4, logits, 1, 8);
  int32_t experts[2];
  float weights[2];
  ASSERT_THAT(ForcedRouting(trace, 4, 1, 2, true, experts, weights), IsOk());
  EXPECT_EQ(experts[0], 4);
  EXPECT_EQ(experts[1], 5);
  EXPECT_NEAR(weights[0] + weights[1], 1.0f, 1e-6);
  EXPECT_FALSE(ForcedRouting(trace, 3, 1, 2, true, experts, weights).ok());
  EXPECT_FALSE(ForcedRouting(trace, 4, 2, 2, true, experts, weights).ok());
}

// Not blind: an exact candidate (median error 0) is held to every gap, the near tie too.
TEST(ForwardCompareTest, TheRoutingRuleHoldsAnExactCandidateToEveryGap) {
  absl::StatusOr<CompareReport> report = CompareRouting(0.0f, {{0, 2}});
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->routing_flips_excused, 0) << report->ToString();
  EXPECT_EQ(report->routing_mismatches, 1) << report->ToString();
  EXPECT_EQ(report->first_routing_mismatch_position, 2) << report->ToString();
}

TEST(ForwardCompareTest, TheRoutingRuleNeedsBothTraces) {
  RouterTrace trace;
  const RoutedModel model(trace, 0.0f, {});
  HostPool pool_a(model.Layout(8), kBlocks, 1);
  HostPool pool_b(model.Layout(8), kBlocks, 2);
  CompareOptions options;
  options.reference_router = &trace;
  EXPECT_FALSE(CompareForwards(model, pool_a, model, pool_b.view(), RandomPrompts({5}, 8, 1),
                               options)
                   .ok());
}

}  // namespace
}  // namespace lockstep::engine::testing

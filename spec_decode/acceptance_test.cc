// The acceptance rule against its definition, exhaustively: every K in 0..5, every
// draft sequence and every target sequence over a three-token alphabet.
#include "spec_decode/acceptance.h"

#include <vector>

#include "gtest/gtest.h"

namespace lockstep::spec {
namespace {

// All sequences of `length` tokens from {0, 1, 2}.
std::vector<std::vector<int32_t>> AllSequences(int length) {
  std::vector<std::vector<int32_t>> out{{}};
  for (int i = 0; i < length; ++i) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& s : out) {
      for (int32_t t = 0; t < 3; ++t) {
        next.push_back(s);
        next.back().push_back(t);
      }
    }
    out = std::move(next);
  }
  return out;
}

TEST(AcceptanceTest, ExhaustiveTableMatchesDefinition) {
  int64_t cases = 0;
  for (int k = 0; k <= 5; ++k) {
    const auto drafts_table = AllSequences(k);
    const auto targets_table = AllSequences(k + 1);
    for (const auto& drafts : drafts_table) {
      for (const auto& targets : targets_table) {
        // Definition: the longest prefix of drafts equal to the targets, then t_a.
        int expected = 0;
        while (expected < k && drafts[expected] == targets[expected]) ++expected;
        std::vector<int> calls;
        const Verdict lazy = AcceptDrafts(drafts, [&](int j) {
          calls.push_back(j);
          return targets[j];
        });
        const Verdict eager = AcceptDrafts(drafts, absl::MakeConstSpan(targets));
        ASSERT_EQ(lazy.accepted, expected) << "K=" << k << " case " << cases;
        ASSERT_EQ(lazy.bonus, targets[expected]) << "K=" << k << " case " << cases;
        ASSERT_EQ(eager.accepted, lazy.accepted);
        ASSERT_EQ(eager.bonus, lazy.bonus);
        // Positions are sampled in order, once each, and only as far as needed.
        ASSERT_EQ(calls.size(), static_cast<size_t>(expected + 1));
        for (int j = 0; j <= expected; ++j) ASSERT_EQ(calls[j], j);
        ++cases;
      }
    }
  }
  // 3^k * 3^(k+1) for k = 0..5.
  EXPECT_EQ(cases, 3 + 27 + 243 + 2187 + 19683 + 177147);
}

TEST(AcceptanceTest, NoDraftsEmitsTheTargetToken) {
  const Verdict v = AcceptDrafts({}, std::vector<int32_t>{7});
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.bonus, 7);
}

TEST(AcceptanceTest, ShortSampledSpanEndsTheComparison) {
  // Only t_0 and t_1 given for three drafts that all match: two can be checked at
  // most, and the last given token must be the bonus.
  const Verdict v = AcceptDrafts(std::vector<int32_t>{4, 5, 6}, std::vector<int32_t>{4, 5});
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.bonus, 5);
  EXPECT_EQ(AcceptDrafts(std::vector<int32_t>{1}, std::vector<int32_t>{}).accepted, 0);
}

}  // namespace
}  // namespace lockstep::spec

#include "spec_decode/ngram_drafter.h"

#include <vector>

#include "gtest/gtest.h"

namespace lockstep::spec {
namespace {

std::vector<int32_t> Propose(const std::vector<int32_t>& tokens, int ngram_max, int k) {
  std::vector<int32_t> out{99};  // cleared by the drafter
  NgramDrafter::ProposeOne(tokens, ngram_max, k, &out);
  return out;
}

TEST(NgramDrafterTest, CopiesWhatFollowedTheLongestMatch) {
  // Last two tokens (3 4) occur at 2..3, followed by 5 6 7; the last token alone (4)
  // occurs more recently at 8 followed by 9: the longer match wins.
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 0, 4, 9, 3, 4};
  EXPECT_EQ(Propose(tokens, 3, 3), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(Propose(tokens, 1, 3), (std::vector<int32_t>{9, 3, 4}));
}

TEST(NgramDrafterTest, MostRecentOccurrenceWins) {
  const std::vector<int32_t> tokens = {7, 1, 7, 2, 7};
  EXPECT_EQ(Propose(tokens, 2, 2), (std::vector<int32_t>{2, 7}));
}

TEST(NgramDrafterTest, AtMostKAndNeverPastTheEnd) {
  const std::vector<int32_t> tokens = {5, 6, 5};
  EXPECT_EQ(Propose(tokens, 2, 4), (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(Propose(tokens, 2, 1), (std::vector<int32_t>{6}));
  EXPECT_TRUE(Propose(tokens, 2, 0).empty());
}

TEST(NgramDrafterTest, NoMatchNoDrafts) {
  EXPECT_TRUE(Propose({1, 2, 3, 4}, 3, 4).empty());
  EXPECT_TRUE(Propose({1}, 3, 4).empty());
  EXPECT_TRUE(Propose({}, 3, 4).empty());
}

TEST(NgramDrafterTest, RepeatingTextIsPredictedExactly) {
  // A period-5 text: after one period every proposal is the true continuation.
  std::vector<int32_t> text;
  for (int i = 0; i < 40; ++i) text.push_back(10 + i % 5);
  for (size_t len = 6; len + 4 <= text.size(); ++len) {
    const std::vector<int32_t> prefix(text.begin(), text.begin() + len);
    const std::vector<int32_t> want(text.begin() + len, text.begin() + len + 4);
    EXPECT_EQ(Propose(prefix, 3, 4), want) << "length " << len;
  }
}

// Only the last kNgramWindow tokens are searched: a match that starts earlier is not
// found, one that starts inside the window is.
TEST(NgramDrafterTest, SearchesTheLastWindowOfTokensOnly) {
  // 1 2 3, filler without a 1 or a 2, then 1 2 again: the window's first token.
  std::vector<int32_t> tokens = {1, 2, 3};
  for (int64_t i = 3; i < kNgramWindow - 2; ++i)
    tokens.push_back(100 + static_cast<int32_t>(i % 50));
  tokens.insert(tokens.end(), {1, 2});
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), kNgramWindow);
  EXPECT_EQ(Propose(tokens, 2, 1), (std::vector<int32_t>{3}));
  // Two more filler tokens in the middle: the earlier 1 2 now lies before the window.
  tokens.insert(tokens.begin() + 10, {100, 101});
  EXPECT_TRUE(Propose(tokens, 2, 1).empty());
}

TEST(NgramDrafterTest, BatchProposesPerQuery) {
  NgramDrafter drafter(2);
  const std::vector<int32_t> a = {1, 2, 1};
  const std::vector<int32_t> b = {3, 4, 5};
  std::vector<DraftQuery> queries = {{a, 2}, {b, 2}};
  std::vector<std::vector<int32_t>> out(2);
  ASSERT_TRUE(drafter.Propose(queries, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out[0], (std::vector<int32_t>{2, 1}));
  EXPECT_TRUE(out[1].empty());
  std::vector<std::vector<int32_t>> wrong(1);
  EXPECT_FALSE(drafter.Propose(queries, absl::MakeSpan(wrong)).ok());
  EXPECT_EQ(drafter.method(), Method::kNgram);
}

}  // namespace
}  // namespace lockstep::spec

#include "spec_decode/budget.h"

#include "gtest/gtest.h"

namespace lockstep::spec {
namespace {

using kv::DraftMode;

TEST(BudgetTest, GenerationStepGrantsOnePlusKInEveryPool) {
  for (int k = 0; k <= 16; ++k) {
    const Grant none = GenerationGrant(k, DraftMode::kNone);
    EXPECT_EQ(none.num_draft_tokens, k);
    EXPECT_EQ(none.target_tokens, 1 + k);
    EXPECT_EQ(none.draft_tokens, 0);
    for (DraftMode mode : {DraftMode::kPaired, DraftMode::kUnpaired}) {
      const Grant g = GenerationGrant(k, mode);
      EXPECT_EQ(g.target_tokens, 1 + k);
      EXPECT_EQ(g.draft_tokens, 1 + k);
    }
  }
}

TEST(BudgetTest, OnlyTheLastChunkOfADraftModelReservesK) {
  // Not the last chunk: the chunk only, whatever K.
  for (DraftMode mode : {DraftMode::kNone, DraftMode::kPaired, DraftMode::kUnpaired}) {
    const Grant g = ContextGrant(24, false, 3, mode);
    EXPECT_EQ(g.num_draft_tokens, 0);
    EXPECT_EQ(g.target_tokens, 24);
    EXPECT_EQ(g.draft_tokens, mode == DraftMode::kNone ? 0 : 24);
  }
  // Last chunk: the draft model writes K proposals' KV; a paired target follows.
  const Grant paired = ContextGrant(24, true, 3, DraftMode::kPaired);
  EXPECT_EQ(paired.target_tokens, 27);
  EXPECT_EQ(paired.draft_tokens, 27);
  const Grant unpaired = ContextGrant(24, true, 3, DraftMode::kUnpaired);
  EXPECT_EQ(unpaired.target_tokens, 24);
  EXPECT_EQ(unpaired.draft_tokens, 27);
  // No draft pool (n-gram): proposals without KV.
  const Grant ngram = ContextGrant(24, true, 3, DraftMode::kNone);
  EXPECT_EQ(ngram.num_draft_tokens, 3);
  EXPECT_EQ(ngram.target_tokens, 24);
  EXPECT_EQ(ngram.draft_tokens, 0);
}

TEST(BudgetTest, KIsCappedByThePositionsLeft) {
  EXPECT_EQ(CapDraftTokens(3, 1000, 0), 3) << "no limit";
  EXPECT_EQ(CapDraftTokens(3, 10, 64), 3);
  // The step verifies [position, position + 1 + K): the last position is 63.
  EXPECT_EQ(CapDraftTokens(3, 60, 64), 3);
  EXPECT_EQ(CapDraftTokens(3, 61, 64), 2);
  EXPECT_EQ(CapDraftTokens(3, 62, 64), 1);
  EXPECT_EQ(CapDraftTokens(3, 63, 64), 0) << "the last position: no drafts";
  EXPECT_EQ(CapDraftTokens(0, 63, 64), 0);
  EXPECT_EQ(CapDraftTokens(3, 64, 64), -1) << "not even one row fits";
  EXPECT_EQ(CapDraftTokens(0, 70, 64), -1);
}

}  // namespace
}  // namespace lockstep::spec

// The step's agreement (engine::StepAgreement, from the step vote): every rank's batch
// carries the same largest row count and context flag, whatever its own batch holds, so
// a device engine picks the same CUDA graph bucket and exchange shapes on every rank.
#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

struct Seen {
  int64_t local_rows = 0;
  bool local_context = false;
  bool dummy = false;
  engine::StepAgreement agreement;
};

class StepAgreementTest : public ::testing::TestWithParam<int> {};  // K

TEST_P(StepAgreementTest, EveryRankSeesTheLargestForwardOfTheStep) {
  absl::Mutex mu;
  std::map<int64_t, std::map<int, Seen>> seen;  // step -> rank -> batch
  ClusterOptions o =
      GetParam() == 0 ? Base(2) : WithDraft(Base(2), kv::DraftMode::kPaired, GetParam());
  o.fail_batch = [&](int rank, const engine::Batch& batch) {
    Seen s;
    for (const engine::ContextChunk& c : batch.context) s.local_rows += c.tokens.size();
    for (const engine::GenerationStep& g : batch.generation) {
      s.local_rows += 1 + g.num_draft_tokens;
      s.dummy = s.dummy || g.is_dummy;
    }
    s.local_context = !batch.context.empty();
    s.agreement = batch.agreement;
    absl::MutexLock lock(&mu);
    seen[batch.step.value()][rank] = s;
    return false;  // record only
  };
  ScriptedCluster c(o);
  // Rank 0 prefills 10 tokens while rank 1 prefills 3, then both decode; rank 1 finishes
  // first and pads with the dummy (its 1 + K rows count too) while rank 0 decodes.
  c.Submit(c.MakeRequest(1, 10, 14, 0));
  c.Submit(c.MakeRequest(2, 3, 4, 1));
  RunToEnd(c, 2);
  // A 2-token prompt on rank 0 alone: rank 1 pads, and with K > 0 its dummy's 1 + K rows
  // are the step's largest forward.
  c.Submit(c.MakeRequest(3, 2, 3, 0));
  RunToEnd(c, 3);

  absl::MutexLock lock(&mu);
  ASSERT_FALSE(seen.empty());
  bool saw_context = false, saw_decode = false, saw_dummy = false;
  for (const auto& [step, ranks] : seen) {
    ASSERT_EQ(ranks.size(), 2u) << "step " << step << ": a forward runs on every rank or none";
    int64_t max_rows = 0;
    bool any_context = false;
    for (const auto& [rank, s] : ranks) {
      for (const auto& [other, o] : ranks) {
        saw_dummy = saw_dummy || (s.dummy && s.local_rows > o.local_rows);
      }
      max_rows = std::max(max_rows, s.local_rows);
      any_context = any_context || s.local_context;
    }
    for (const auto& [rank, s] : ranks) {
      EXPECT_TRUE(s.agreement.agreed) << "step " << step << " rank " << rank;
      EXPECT_EQ(s.agreement.max_rows, max_rows) << "step " << step << " rank " << rank;
      EXPECT_EQ(s.agreement.any_context, any_context) << "step " << step << " rank " << rank;
    }
    if (step == 0) {
      EXPECT_EQ(max_rows, 10);
      EXPECT_TRUE(any_context);
    }
    saw_context = saw_context || any_context;
    saw_decode = saw_decode || !any_context;
  }
  EXPECT_TRUE(saw_context);
  EXPECT_TRUE(saw_decode);
  if (GetParam() > 0) EXPECT_TRUE(saw_dummy) << "no step where the dummy had the most rows";
}

INSTANTIATE_TEST_SUITE_P(DraftTokens, StepAgreementTest, ::testing::Values(0, 3));

}  // namespace
}  // namespace lockstep::testing

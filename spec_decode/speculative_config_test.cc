#include "spec_decode/speculative_config.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::spec {
namespace {

// "field: message" of each problem.
std::vector<std::string> Lines(const SpeculativeConfig& c) {
  std::vector<std::string> out;
  for (const ConfigProblem& p : c.Problems()) out.push_back(p.field + ": " + p.message);
  return out;
}

TEST(SpeculativeConfigTest, MethodNamesRoundTrip) {
  for (Method m : {Method::kNone, Method::kDraftModel, Method::kNgram, Method::kMtp}) {
    const absl::StatusOr<Method> parsed = ParseMethod(MethodName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  const absl::StatusOr<Method> bad = ParseMethod("medusa");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("draft_model"), std::string_view::npos);
}

TEST(SpeculativeConfigTest, ProblemsNameTheField) {
  EXPECT_TRUE(SpeculativeConfig().Validate().ok());
  EXPECT_TRUE(SpeculativeConfig().Problems().empty());
  EXPECT_FALSE(SpeculativeConfig().enabled());
  SpeculativeConfig c{.method = Method::kNgram, .num_draft_tokens = 4, .dynamic = true};
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_TRUE(c.enabled());
  EXPECT_FALSE(c.needs_draft_kv());
  c.num_draft_tokens = 0;
  EXPECT_EQ(Lines(c), std::vector<std::string>{"num_draft_tokens: must be in [1, 16], got 0"});
  c.num_draft_tokens = 17;
  c.ngram_max = 0;
  EXPECT_EQ(Lines(c), (std::vector<std::string>{"num_draft_tokens: must be in [1, 16], got 17",
                                                "ngram_max: must be in [1, 16], got 0"}));
  EXPECT_EQ(c.Validate().message(),
            "num_draft_tokens: must be in [1, 16], got 17\nngram_max: must be in [1, 16], got 0");
  SpeculativeConfig none{.num_draft_tokens = 3, .dynamic = true};
  EXPECT_EQ(Lines(none),
            (std::vector<std::string>{"num_draft_tokens: must be 0 with method none, got 3",
                                      "dynamic: needs a method (draft_model, ngram or mtp)"}));
}

TEST(SpeculativeConfigTest, TheDraftModelAndMtpNeedADraftPoolAndNothingElseUsesOne) {
  const SpeculativeConfig draft{.method = Method::kDraftModel, .num_draft_tokens = 3};
  EXPECT_TRUE(draft.needs_draft_kv());
  EXPECT_EQ(draft.DraftPoolProblem(kv::DraftMode::kPaired), "");
  EXPECT_EQ(draft.DraftPoolProblem(kv::DraftMode::kUnpaired), "");
  EXPECT_EQ(draft.DraftPoolProblem(kv::DraftMode::kNone),
            "must be paired or unpaired with speculative.method draft_model (the draft model's "
            "KV lives there)");
  const SpeculativeConfig mtp{.method = Method::kMtp, .num_draft_tokens = 2};
  EXPECT_TRUE(mtp.needs_draft_kv());
  EXPECT_EQ(mtp.DraftPoolProblem(kv::DraftMode::kPaired), "");
  EXPECT_EQ(mtp.DraftPoolProblem(kv::DraftMode::kNone),
            "must be paired or unpaired with speculative.method mtp (the MTP module's KV lives "
            "there)");
  const SpeculativeConfig ngram{.method = Method::kNgram, .num_draft_tokens = 3};
  EXPECT_EQ(ngram.DraftPoolProblem(kv::DraftMode::kNone), "");
  EXPECT_EQ(ngram.DraftPoolProblem(kv::DraftMode::kUnpaired),
            "must be none with speculative.method ngram (it keeps no draft KV), got unpaired");
  EXPECT_EQ(SpeculativeConfig().DraftPoolProblem(kv::DraftMode::kPaired),
            "must be none with speculative.method none (nothing drafts), got paired");
}

TEST(SpeculativeConfigTest, StepDraftTokensIsKOrTheRequestsDynamicK) {
  EXPECT_EQ(SpeculativeConfig().StepDraftTokens(nullptr), 0);
  SpeculativeConfig c{.method = Method::kNgram, .num_draft_tokens = 4};
  DynamicK request = c.MakeDynamicK();
  EXPECT_EQ(request.max_k(), 4);
  for (int step = 0; step < 3; ++step) request.Observe(4, 0);  // drafts fail: K shrinks
  ASSERT_LT(request.k(), 4);
  EXPECT_EQ(c.StepDraftTokens(&request), 4) << "fixed K ignores the request's choice";
  c.dynamic = true;
  EXPECT_EQ(c.StepDraftTokens(&request), request.k());
  EXPECT_EQ(c.StepDraftTokens(nullptr), 4) << "the pad dummy takes the instance's K";
  EXPECT_EQ(SpeculativeConfig().MakeDynamicK().max_k(), 0);
}

}  // namespace
}  // namespace lockstep::spec

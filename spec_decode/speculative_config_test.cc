#include "spec_decode/speculative_config.h"

#include "gtest/gtest.h"

namespace lockstep::spec {
namespace {

TEST(SpeculativeConfigTest, MethodNamesRoundTrip) {
  for (Method m : {Method::kNone, Method::kDraftModel, Method::kNgram}) {
    const absl::StatusOr<Method> parsed = ParseMethod(MethodName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  const absl::StatusOr<Method> bad = ParseMethod("medusa");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("draft_model"), std::string_view::npos);
}

TEST(SpeculativeConfigTest, Validate) {
  EXPECT_TRUE(SpeculativeConfig().Validate().ok());
  EXPECT_FALSE(SpeculativeConfig().enabled());
  SpeculativeConfig c;
  c.method = Method::kNgram;
  c.num_draft_tokens = 4;
  c.dynamic = true;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_TRUE(c.enabled());
  EXPECT_FALSE(c.needs_draft_kv());
  c.num_draft_tokens = 0;
  EXPECT_NE(c.Validate().message().find("num_draft_tokens must be in [1, 16]"),
            std::string_view::npos);
  c.num_draft_tokens = 17;
  EXPECT_FALSE(c.Validate().ok());
  c.num_draft_tokens = 2;
  c.ngram_max = 0;
  EXPECT_NE(c.Validate().message().find("ngram_max"), std::string_view::npos);
  c.ngram_max = 3;
  c.method = Method::kDraftModel;
  EXPECT_TRUE(c.needs_draft_kv());
  SpeculativeConfig none;
  none.num_draft_tokens = 3;
  EXPECT_NE(none.Validate().message().find("must be 0 with method none"), std::string_view::npos);
  none.num_draft_tokens = 0;
  none.dynamic = true;
  EXPECT_FALSE(none.Validate().ok());
}

}  // namespace
}  // namespace lockstep::spec

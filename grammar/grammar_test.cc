#include "grammar/grammar.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "grammar/utf8_ranges.h"
#include "gtest/gtest.h"

namespace lockstep::grammar {
namespace {

using ::testing::HasSubstr;

TEST(GrammarBuilderTest, UndefinedRuleIsNamed) {
  GrammarBuilder b;
  int32_t root = b.Rule("root");
  b.Define(root, Expr::Sequence({Expr::Literal("a"), Expr::Ref(b.Rule("missing"))}));
  absl::StatusOr<Grammar> g = b.Build(root);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("'missing' is used but never defined"));
}

TEST(GrammarBuilderTest, LeftRecursionIsRejected) {
  GrammarBuilder b;
  int32_t root = b.Rule("root");
  int32_t list = b.Rule("list");
  b.Define(root, Expr::Ref(list));
  b.Define(list, Expr::Choice(
                     {Expr::Sequence({Expr::Ref(list), Expr::Literal(",x")}), Expr::Literal("x")}));
  absl::StatusOr<Grammar> g = b.Build(root);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("'list' is left-recursive"));
}

TEST(GrammarBuilderTest, LeftRecursionThroughNullablePrefixIsRejected) {
  GrammarBuilder b;
  int32_t root = b.Rule("root");
  int32_t opt = b.Rule("opt");
  b.Define(opt, Expr::Optional(Expr::Literal("a")));
  b.Define(root,
           Expr::Choice({Expr::Sequence({Expr::Ref(opt), Expr::Ref(root)}), Expr::Literal("b")}));
  EXPECT_THAT(b.Build(root).status().message(), HasSubstr("left-recursive"));
}

TEST(GrammarBuilderTest, RuleThatCannotFinishIsRejected) {
  GrammarBuilder b;
  int32_t root = b.Rule("root");
  b.Define(root, Expr::Sequence({Expr::Literal("a"), Expr::Ref(root)}));
  EXPECT_THAT(b.Build(root).status().message(), HasSubstr("'root' can never finish"));
}

TEST(GrammarBuilderTest, RepetitionBoundsAreChecked) {
  GrammarBuilder b;
  int32_t root = b.Rule("root");
  b.Define(root, Expr::Repeat(Expr::Literal("a"), 3, 2));
  EXPECT_THAT(b.Build(root).status().message(), HasSubstr("invalid repetition bounds {3,2}"));
  b.Define(root, Expr::Repeat(Expr::Literal("a"), 0, GrammarBuilder::kMaxRepeat + 1));
  EXPECT_THAT(b.Build(root).status().message(), HasSubstr("above the supported"));
  b.Define(root, Expr::Repeat(Expr::Literal("a"), 2, 4));
  EXPECT_TRUE(b.Build(root).ok());
}

TEST(Utf8RangesTest, ComplementAndNormalize) {
  CodePointRanges r = NormalizeRanges({{5, 9}, {0, 3}, {4, 4}, {20, 30}});
  EXPECT_EQ(r, (CodePointRanges{{0, 9}, {20, 30}}));
  EXPECT_EQ(ComplementRanges(r), (CodePointRanges{{10, 19}, {31, kMaxCodePoint}}));
}

TEST(Utf8RangesTest, AppendUtf8) {
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) AppendUtf8(cp, &s);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace lockstep::grammar

#include "tokenizer/clean_up_spaces.h"

#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

// Expected values worked out by hand from transformers' replace chain.
TEST(CleanUpTokenizationSpacesTest, RemovesTheSpaceBeforePunctuationAndContractions) {
  EXPECT_EQ(CleanUpTokenizationSpaces("Hello , world ! Is it ? Yes ."),
            "Hello, world! Is it? Yes.");
  EXPECT_EQ(CleanUpTokenizationSpaces("I do n't know , I 'm sure he 's ok"),
            "I don't know, I'm sure he's ok");
  EXPECT_EQ(CleanUpTokenizationSpaces("we 've and they 're"), "we've and they're");
  EXPECT_EQ(CleanUpTokenizationSpaces("no change: a.b, c!d"), "no change: a.b, c!d");
  EXPECT_EQ(CleanUpTokenizationSpaces(""), "");
}

TEST(CleanUpTokenizationSpacesTest, IsLossyOnCode) {
  EXPECT_EQ(CleanUpTokenizationSpaces("x = ' ' .join(y)"), "x =''.join(y)");
}

// Each pass sees the output of the ones before it, and matches do not overlap.
TEST(CleanUpTokenizationSpacesTest, PassesRunInOrderWithoutOverlap) {
  // " ' " -> "'" makes " 'm" for the later pass.
  EXPECT_EQ(CleanUpTokenizationSpaces("x  ' m"), "x'm");
  // One pass of " ." leaves " ." where two spaces preceded the dot.
  EXPECT_EQ(CleanUpTokenizationSpaces("a  ."), "a .");
  // " ' " matches do not overlap: " ' ' " is one match and a quote.
  EXPECT_EQ(CleanUpTokenizationSpaces("a ' ' b"), "a'' b");
}

}  // namespace
}  // namespace lockstep::tok

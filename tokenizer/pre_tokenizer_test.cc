#include "tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(const std::string& config, std::string_view text,
                               bool at_input_start = true) {
  const absl::StatusOr<PreTokenizer> pre = PreTokenizer::FromJson(nlohmann::json::parse(config));
  EXPECT_TRUE(pre.ok()) << pre.status();
  if (!pre.ok()) return {};
  Words words;
  pre->Split(text, at_input_start, &words);
  std::vector<std::string> out;
  for (size_t i = 0; i < words.ranges.size(); ++i) out.emplace_back(words.word(i));
  return out;
}

std::string SplitOnSpace(const std::string& behavior) {
  return R"({"type": "Split", "pattern": {"String": " "}, "invert": false, "behavior": ")" +
         behavior + "\"}";
}

TEST(PreTokenizerTest, SplitBehaviors) {
  // Hugging Face's documented examples (pre_tokenizers/split.rs).
  const char kText[] = "How are you doing?";
  EXPECT_THAT(Split(SplitOnSpace("Removed"), kText), ElementsAre("How", "are", "you", "doing?"));
  EXPECT_THAT(Split(SplitOnSpace("Isolated"), kText),
              ElementsAre("How", " ", "are", " ", "you", " ", "doing?"));
  EXPECT_THAT(Split(SplitOnSpace("MergedWithPrevious"), kText),
              ElementsAre("How ", "are ", "you ", "doing?"));
  EXPECT_THAT(Split(SplitOnSpace("MergedWithNext"), kText),
              ElementsAre("How", " are", " you", " doing?"));
  EXPECT_THAT(Split(SplitOnSpace("Contiguous"), "How  are"), ElementsAre("How", "  ", "are"));
  EXPECT_THAT(Split(SplitOnSpace("MergedWithPrevious"), "a  b"), ElementsAre("a ", " ", "b"));
}

TEST(PreTokenizerTest, InvertedRegexSplit) {
  EXPECT_THAT(Split(R"({"type": "Split", "pattern": {"Regex": "\\p{L}+"}, "behavior": "Removed",
                       "invert": true})",
                    "ab, cd!"),
              ElementsAre("ab", "cd"));
}

TEST(PreTokenizerTest, Digits) {
  EXPECT_THAT(Split(R"({"type": "Digits", "individual_digits": true})", "a123b٣"),
              ElementsAre("a", "1", "2", "3", "b", "٣"));
  EXPECT_THAT(Split(R"({"type": "Digits", "individual_digits": false})", "a123b"),
              ElementsAre("a", "123", "b"));
}

TEST(PreTokenizerTest, Metaspace) {
  const char kAlways[] = R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})";
  EXPECT_THAT(Split(kAlways, "Hey friend"), ElementsAre("▁Hey", "▁friend"));
  EXPECT_THAT(Split(kAlways, " Hey  you", false), ElementsAre("▁Hey", "▁", "▁you"));
  const char kFirst[] = R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"})";
  EXPECT_THAT(Split(kFirst, "Hey", true), ElementsAre("▁Hey"));
  EXPECT_THAT(Split(kFirst, "Hey", false), ElementsAre("Hey"));
  EXPECT_THAT(Split(R"({"type": "Metaspace", "prepend_scheme": "never", "split": false})", "a b"),
              ElementsAre("a▁b"));
}

TEST(PreTokenizerTest, ByteLevelWithItsOwnRegex) {
  EXPECT_THAT(Split(R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})",
                    "Hello world's  x"),
              ElementsAre(" Hello", " world", "'s", " ", " x"));
}

TEST(PreTokenizerTest, UnsupportedTypesAndOrders) {
  for (const char* config : {
           R"({"type": "Whitespace"})",
           R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Digits"}]})",
           R"({"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated"})",
           R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})",
       }) {
    EXPECT_FALSE(PreTokenizer::FromJson(nlohmann::json::parse(config)).ok()) << config;
  }
  EXPECT_EQ(
      PreTokenizer::FromJson(nlohmann::json::parse(R"({"type": "Whitespace"})")).status().message(),
      "pre_tokenizer type 'Whitespace' is not supported");
}

}  // namespace
}  // namespace lockstep::tok

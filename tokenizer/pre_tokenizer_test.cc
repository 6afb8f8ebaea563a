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

// The examples of Hugging Face's Rust tests (pre_tokenizers/*.rs), then Unicode cases.
TEST(PreTokenizerTest, Whitespace) {
  const char kWhitespace[] = R"({"type": "Whitespace"})";
  EXPECT_THAT(Split(kWhitespace, "Hey man!"), ElementsAre("Hey", "man", "!"));
  EXPECT_THAT(Split(kWhitespace, "How are you doing?"),
              ElementsAre("How", "are", "you", "doing", "?"));
  EXPECT_THAT(Split(kWhitespace, "\n"), ElementsAre());
  // \w is Unicode: letters, marks, digits, connector punctuation, Alphabetic symbols.
  EXPECT_THAT(Split(kWhitespace, "na\u0308ive_x\u24B6 \u0663\u0664!?\u00A0\u4E2D\u6587"),
              ElementsAre("na\u0308ive_x\u24B6", "\u0663\u0664", "!?", "\u4E2D\u6587"));
  const char kSplit[] = R"({"type": "WhitespaceSplit"})";
  EXPECT_THAT(Split(kSplit, "Hey, man, Good?"), ElementsAre("Hey,", "man,", "Good?"));
  EXPECT_THAT(Split(kSplit, "a\u3000b\u2028 c"), ElementsAre("a", "b", "c"));
}

TEST(PreTokenizerTest, BertAndPunctuation) {
  EXPECT_THAT(Split(R"({"type": "BertPreTokenizer"})", "Hey friend!     How are you?!?"),
              ElementsAre("Hey", "friend", "!", "How", "are", "you", "?", "!", "?"));
  EXPECT_THAT(Split(R"({"type": "BertPreTokenizer"})", " \u91CE \u53E3 $5\u00BF"),
              ElementsAre("\u91CE", "\u53E3", "$", "5", "\u00BF"));
  EXPECT_THAT(Split(R"({"type": "Punctuation"})", "Hey friend!     How are you?!?"),
              ElementsAre("Hey friend", "!", "     How are you", "?", "!", "?"));
  EXPECT_THAT(Split(R"({"type": "Punctuation", "behavior": "Contiguous"})", "a?!b"),
              ElementsAre("a", "?!", "b"));
}

TEST(PreTokenizerTest, CharDelimiterSplitAndFixedLength) {
  EXPECT_THAT(
      Split(R"({"type": "CharDelimiterSplit", "delimiter": "\u00E9"})", "a\u00E9b\u00E9\u00E9c"),
      ElementsAre("a", "b", "c"));
  const char kFive[] = R"({"type": "FixedLength"})";
  EXPECT_THAT(Split(kFive, "Hello world"), ElementsAre("Hello", " worl", "d"));
  EXPECT_THAT(Split(R"({"type": "FixedLength", "length": 3})", "Hello 👋 world"),
              ElementsAre("Hel", "lo ", "👋 w", "orl", "d"));
}

TEST(PreTokenizerTest, UnicodeScripts) {
  const char kScripts[] = R"({"type": "UnicodeScripts"})";
  EXPECT_THAT(Split(kScripts, "どこで生れ。Yes"), ElementsAre("どこで生れ", "。", "Yes"));
  EXPECT_THAT(Split(kScripts, "Apples are りんご 林檎"), ElementsAre("Apples are ", "りんご 林檎"));
  EXPECT_THAT(Split(kScripts, "\u30AB\u30FC\u0645\u0631"),
              ElementsAre("\u30AB\u30FC", "\u0645\u0631"));
  // As in Rust, leading spaces (which belong to no script of their own) are dropped.
  EXPECT_THAT(Split(kScripts, "  ab"), ElementsAre("ab"));
}

TEST(PreTokenizerTest, UnsupportedTypesAndOrders) {
  for (const char* config : {
           R"({"type": "Deduplicate"})",
           R"({"type": "FixedLength", "length": 0})",
           R"({"type": "CharDelimiterSplit", "delimiter": "ab"})",
           R"({"type": "Punctuation", "behavior": "Sideways"})",
           R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Digits"}]})",
           R"({"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated"})",
           R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways"})",
       }) {
    EXPECT_FALSE(PreTokenizer::FromJson(nlohmann::json::parse(config)).ok()) << config;
  }
  EXPECT_EQ(PreTokenizer::FromJson(nlohmann::json::parse(R"({"type": "Deduplicate"})"))
                .status()
                .message(),
            "pre_tokenizer type 'Deduplicate' is not supported");
}

}  // namespace
}  // namespace lockstep::tok

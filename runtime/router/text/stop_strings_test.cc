#include "runtime/router/text/stop_strings.h"

#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

// Feeds `pieces` and returns the concatenated output (Flush included unless stopped).
std::string Feed(StopStringMatcher& matcher, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& piece : pieces) out += matcher.Push(piece);
  return out + matcher.Flush();
}

// Every way to cut `text` into two or three pieces.
std::vector<std::vector<std::string>> Splits(const std::string& text) {
  std::vector<std::vector<std::string>> splits;
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      splits.push_back({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
    }
  }
  return splits;
}

TEST(StopStringsTest, CutsAtTheStopStringAtEverySplit) {
  const std::string text = "Hello END of story";
  for (const auto& pieces : Splits(text)) {
    StopStringMatcher matcher({"END"});
    EXPECT_EQ(Feed(matcher, pieces), "Hello ") << pieces[0] << "|" << pieces[1] << "|" << pieces[2];
    EXPECT_TRUE(matcher.stopped());
  }
}

TEST(StopStringsTest, HoldsBackOnlyWhatCouldBeginAStopString) {
  StopStringMatcher matcher({"\n\n", "ENDS"});
  EXPECT_EQ(matcher.Push("a\n"), "a");  // "\n" may begin "\n\n"
  EXPECT_EQ(matcher.Push("b"), "\nb");
  EXPECT_EQ(matcher.Push("cEN"), "c");  // "EN" may begin "ENDS"
  EXPECT_EQ(matcher.Push("Dx"), "ENDx");
  EXPECT_EQ(matcher.Push("EEN"), "E");  // the second "E" begins "EN..."
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.Flush(), "EN");  // no stop string came: the held text is final
}

TEST(StopStringsTest, EarliestStopStringWinsAndLaterTextIsDropped) {
  StopStringMatcher matcher({"bc", "abcd", "x"});
  EXPECT_EQ(matcher.Push("zab"), "z");
  EXPECT_EQ(matcher.Push("cd x more"), "a");  // "bc" completes before "abcd"
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.Push("more"), "");
  EXPECT_EQ(matcher.Flush(), "");
}

TEST(StopStringsTest, OverlappingPrefixesAndMultiByteText) {
  // "aab" after "aaab": the tail "aa" must stay held although "a" alone was emitted.
  StopStringMatcher matcher({"aab"});
  EXPECT_EQ(matcher.Push("a"), "");
  EXPECT_EQ(matcher.Push("a"), "");
  EXPECT_EQ(matcher.Push("a"), "a");
  EXPECT_EQ(matcher.Push("b!"), "");
  EXPECT_TRUE(matcher.stopped());

  StopStringMatcher utf8({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(utf8.Push("caf\xC3\xA9 \xC3\xA9"), "caf\xC3\xA9 ");
  EXPECT_EQ(utf8.Push("t"), "");
  EXPECT_EQ(utf8.Push("\xC3\xA9!"), "");
  EXPECT_TRUE(utf8.stopped());
}

TEST(StopStringsTest, NoStopsPassEverythingThrough) {
  StopStringMatcher matcher({"", ""});
  EXPECT_TRUE(matcher.empty());
  EXPECT_EQ(matcher.Push("abc"), "abc");
  EXPECT_EQ(matcher.Flush(), "");
}

// Random texts, stops and splits against a byte-by-byte oracle: the output is the text
// before the first stop string to complete, however the text is split.
TEST(StopStringsTest, RandomSplitsMatchTheByteByByteOracle) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  auto random_string = [&](int max_len) {
    std::string s(1 + rng() % max_len, ' ');
    for (char& c : s) c = "abc\n"[rng() % 4];
    return s;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<std::string> stops;
    for (int i = 0, n = 1 + rng() % 4; i < n; ++i) stops.push_back(random_string(4));
    const std::string text = random_string(30);
    // The first stop string to complete; of those ending together, the one starting first.
    size_t cut = std::string::npos;
    for (size_t end = 1; end <= text.size() && cut == std::string::npos; ++end) {
      for (const std::string& stop : stops) {
        if (stop.size() <= end && text.compare(end - stop.size(), stop.size(), stop) == 0) {
          cut = std::min(cut, end - stop.size());
        }
      }
    }
    const std::string want = text.substr(0, cut);
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = rng() % 5;
      pieces.push_back(text.substr(pos, len));
      pos += len;
    }
    StopStringMatcher matcher(stops);
    std::string described;
    for (const std::string& stop : stops) described += "'" + stop + "' ";
    for (const std::string& piece : pieces) described += "|" + piece;
    ASSERT_EQ(Feed(matcher, pieces), want)
        << "text '" << text << "' stops and pieces " << described << " iteration " << iter;
    ASSERT_EQ(matcher.stopped(), cut != std::string::npos);
  }
}

}  // namespace
}  // namespace lockstep::router

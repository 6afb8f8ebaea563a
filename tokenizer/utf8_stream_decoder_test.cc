#include "tokenizer/utf8_stream_decoder.h"

#include <random>
#include <string>
#include <vector>

#include "common/testing/seed.h"
#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

// "a", "é" (2 bytes), "€" (3), "😀" (4), "中" (3).
const std::string kMixed = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xE4\xB8\xAD!";

// True when `s` is a concatenation of complete, valid UTF-8 characters.
bool IsValidUtf8(const std::string& s) {
  Utf8StreamDecoder check;
  std::string out = check.Push(s);
  return out == s && check.pending_bytes() == 0;
}

TEST(Utf8StreamDecoderTest, WholeTextPassesThrough) {
  Utf8StreamDecoder decoder;
  EXPECT_EQ(decoder.Push(kMixed), kMixed);
  EXPECT_EQ(decoder.Flush(), "");
}

TEST(Utf8StreamDecoderTest, EverySplitPointYieldsWholeCharactersOnly) {
  for (size_t split = 0; split <= kMixed.size(); ++split) {
    SCOPED_TRACE(split);
    Utf8StreamDecoder decoder;
    const std::string first = decoder.Push(kMixed.substr(0, split));
    const std::string second = decoder.Push(kMixed.substr(split));
    EXPECT_TRUE(IsValidUtf8(first));
    EXPECT_TRUE(IsValidUtf8(second));
    EXPECT_EQ(first + second, kMixed);
    EXPECT_EQ(decoder.Flush(), "");
  }
}

TEST(Utf8StreamDecoderTest, ByteAtATime) {
  Utf8StreamDecoder decoder;
  std::vector<std::string> pieces;
  for (char c : kMixed) pieces.push_back(decoder.Push(std::string(1, c)));
  // The 4-byte emoji is held back for three bytes and released on the fourth.
  EXPECT_EQ(pieces[6], "");
  EXPECT_EQ(pieces[7], "");
  EXPECT_EQ(pieces[8], "");
  EXPECT_EQ(pieces[9], "\xF0\x9F\x98\x80");
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, kMixed);
}

TEST(Utf8StreamDecoderTest, RandomChunkingReassemblesExactly) {
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  std::string text;
  for (int i = 0; i < 50; ++i) text += kMixed;
  for (int round = 0; round < 20; ++round) {
    Utf8StreamDecoder decoder;
    std::string joined;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t len = std::uniform_int_distribution<size_t>(0, 7)(rng);
      const std::string piece = decoder.Push(text.substr(pos, len));
      ASSERT_TRUE(IsValidUtf8(piece));
      joined += piece;
      pos += len;
    }
    joined += decoder.Flush();
    EXPECT_EQ(joined, text);
  }
}

TEST(Utf8StreamDecoderTest, InvalidBytesBecomeReplacementCharacters) {
  const std::string r(kReplacementChar);
  struct Case {
    std::string in;
    std::string out;
  };
  const std::vector<Case> cases = {
      {"\x80", r},                           // lone continuation byte
      {std::string("\xFF") + "a", r + "a"},  // never valid
      {"\xC0\xAF", r + r},                   // overlong lead bytes
      {"\xC3(", r + "("},                    // broken 2-byte sequence
      {"\xE2\x82(", r + "("},                // broken 3-byte sequence: one U+FFFD for the prefix
      {"\xED\xA0\x80", r + r + r},           // surrogate: ED A0 is invalid at the second byte
      {"\xF4\x90\x80\x80", r + r + r + r},   // above U+10FFFF
  };
  for (const Case& c : cases) {
    Utf8StreamDecoder decoder;
    EXPECT_EQ(decoder.Push(c.in) + decoder.Flush(), c.out) << "input of " << c.in.size();
  }
}

TEST(Utf8StreamDecoderTest, FlushReplacesAnUnfinishedCharacter) {
  Utf8StreamDecoder decoder;
  EXPECT_EQ(decoder.Push("ok\xF0\x9F"), "ok");
  EXPECT_EQ(decoder.pending_bytes(), 2u);
  EXPECT_EQ(decoder.Flush(), kReplacementChar);
  EXPECT_EQ(decoder.pending_bytes(), 0u);
  EXPECT_EQ(decoder.Flush(), "");
}

}  // namespace
}  // namespace lockstep::tok

#include "tokenizer/unicode.h"

#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

TEST(UnicodeTest, Categories) {
  EXPECT_EQ(CategoryOf('A'), GeneralCategory::kLu);
  EXPECT_EQ(CategoryOf('z'), GeneralCategory::kLl);
  EXPECT_EQ(CategoryOf('7'), GeneralCategory::kNd);
  EXPECT_EQ(CategoryOf(0x4E00), GeneralCategory::kLo);
  EXPECT_EQ(CategoryOf(0x0301), GeneralCategory::kMn);
  EXPECT_EQ(CategoryOf(0x1F600), GeneralCategory::kSo);
  EXPECT_EQ(CategoryOf(0x2160), GeneralCategory::kNl);
  EXPECT_EQ(CategoryOf(0xE000), GeneralCategory::kCo);
  EXPECT_EQ(CategoryOf(0x10FFFF), GeneralCategory::kCn);
  EXPECT_TRUE(IsIn(0x00BD, kNumberMask));
  EXPECT_TRUE(IsIn(0x20AC, kSymbolMask));
  EXPECT_EQ(CategoryMaskByName("Letter"), kLetterMask);
  EXPECT_EQ(CategoryMaskByName("Nd"), Bit(GeneralCategory::kNd));
  EXPECT_EQ(CategoryMaskByName("Nope"), 0u);
}

TEST(UnicodeTest, WhiteSpace) {
  for (uint32_t cp : {0x09, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x3000}) {
    EXPECT_TRUE(IsWhiteSpace(cp)) << std::hex << cp;
  }
  for (uint32_t cp : {0x08, 0x0E, 0x200B, 0xFEFF, 0x180E, 0x61}) {
    EXPECT_FALSE(IsWhiteSpace(cp)) << std::hex << cp;
  }
}

TEST(UnicodeTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8("h\u00E9\u4E2D\U0001F600"));
  for (const char* bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8", "\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b\xE4\xB8"
                        "c\xE4\xB8"),
            "a\uFFFDb\uFFFDc\uFFFD");
  std::string s;
  for (uint32_t cp : {0x41, 0xE9, 0x4E2D, 0x1F600}) AppendUtf8(cp, &s);
  EXPECT_EQ(s, "A\u00E9\u4E2D\U0001F600");
  size_t pos = 0;
  EXPECT_EQ(NextCodePoint(s, &pos), 0x41u);
  EXPECT_EQ(NextCodePoint(s, &pos), 0xE9u);
  EXPECT_EQ(NextCodePoint(s, &pos), 0x4E2Du);
  EXPECT_EQ(NextCodePoint(s, &pos), 0x1F600u);
  EXPECT_EQ(pos, s.size());
  EXPECT_EQ(CodePointCount(s), 4u);
  EXPECT_EQ(CodePointCount(""), 0u);
}

}  // namespace
}  // namespace lockstep::tok

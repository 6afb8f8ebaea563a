#include "tokenizer/nfc.h"

#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

TEST(NfcTest, ComposesReordersAndKeepsBlockedMarks) {
  EXPECT_EQ(ToNfc("e\u0301"), "\u00E9");
  EXPECT_EQ(ToNfc("s\u0307\u0323"), "\u1E69");  // reordered below-dot first, then composed
  EXPECT_EQ(ToNfc("a\u0301\u0301"), "\u00E1\u0301");
  EXPECT_EQ(ToNfc("\u212B"), "\u00C5");              // ANGSTROM SIGN is a singleton
  EXPECT_EQ(ToNfc("\u0344"), "\u0308\u0301");        // excluded from composition
  EXPECT_EQ(ToNfc("\u0301e"), "\u0301e");            // a leading mark stays
  EXPECT_EQ(ToNfc("\u00E9\u0323"), "\u1EB9\u0301");  // recomposed around a lower class
}

TEST(NfcTest, Hangul) {
  EXPECT_EQ(ToNfc("\u1100\u1161\u11A8"), "\uAC01");
  EXPECT_EQ(ToNfc("\uAC00\u11A8"), "\uAC01");
  EXPECT_EQ(ToNfc("\uAC01"), "\uAC01");
}

TEST(NfcTest, UnchangedTextIsCopied) {
  for (const char* s :
       {"", "plain ASCII", "中文 かな 한국어", "caf\u00E9 na\u00EFve", "😀👍🏽"}) {
    EXPECT_EQ(ToNfc(s), s);
  }
  EXPECT_EQ(ToNfc("xx e\u0301 yy o\u0308!"), "xx \u00E9 yy \u00F6!");
}

TEST(NfdTest, DecomposesAndReorders) {
  EXPECT_EQ(ToNfd("\u00E9"), "e\u0301");
  EXPECT_EQ(ToNfd("\u1E69"), "s\u0323\u0307");
  EXPECT_EQ(ToNfd("s\u0307\u0323"), "s\u0323\u0307");  // reordered, not composed
  EXPECT_EQ(ToNfd("\u212B"), "A\u030A");
  EXPECT_EQ(ToNfd("\uAC01"), "\u1100\u1161\u11A8");
  EXPECT_EQ(ToNfd("\uFB01 plain \u4E2D"), "\uFB01 plain \u4E2D");  // no compatibility mapping
  EXPECT_EQ(ToNfd("x\u00E9y\u00F6"), "xe\u0301yo\u0308");
}

}  // namespace
}  // namespace lockstep::tok

#include "tokenizer/unicode_normalization.h"

#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

std::string Nfc(std::string_view s) { return ToNormalForm(NormalForm::kNfc, s); }

TEST(UnicodeNormalizationTest, NfcComposesReordersAndKeepsBlockedMarks) {
  EXPECT_EQ(Nfc("e\u0301"), "\u00E9");
  EXPECT_EQ(Nfc("s\u0307\u0323"), "\u1E69");  // reordered below-dot first, then composed
  EXPECT_EQ(Nfc("a\u0301\u0301"), "\u00E1\u0301");
  EXPECT_EQ(Nfc("\u212B"), "\u00C5");              // ANGSTROM SIGN is a singleton
  EXPECT_EQ(Nfc("\u0344"), "\u0308\u0301");        // excluded from composition
  EXPECT_EQ(Nfc("\u0301e"), "\u0301e");            // a leading mark stays
  EXPECT_EQ(Nfc("\u00E9\u0323"), "\u1EB9\u0301");  // recomposed around a lower class
  EXPECT_EQ(Nfc("\uFB01"), "\uFB01");              // compatibility mappings stay
}

TEST(UnicodeNormalizationTest, NfcHangul) {
  EXPECT_EQ(Nfc("\u1100\u1161\u11A8"), "\uAC01");
  EXPECT_EQ(Nfc("\uAC00\u11A8"), "\uAC01");
  EXPECT_EQ(Nfc("\uAC01"), "\uAC01");
}

TEST(UnicodeNormalizationTest, UnchangedTextIsCopied) {
  for (const char* s :
       {"", "plain ASCII", "中文 かな 한국어", "caf\u00E9 na\u00EFve", "😀👍🏽"}) {
    EXPECT_EQ(Nfc(s), s);
  }
  EXPECT_EQ(Nfc("xx e\u0301 yy o\u0308!"), "xx \u00E9 yy \u00F6!");
}

TEST(UnicodeNormalizationTest, Nfd) {
  EXPECT_EQ(ToNormalForm(NormalForm::kNfd, "\u00E9"), "e\u0301");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfd, "\u1E69"), "s\u0323\u0307");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfd, "\uAC01"), "\u1100\u1161\u11A8");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfd, "\uFB01"), "\uFB01");
}

TEST(UnicodeNormalizationTest, CompatibilityForms) {
  // The examples of Hugging Face's NFKC test and UAX #15.
  EXPECT_EQ(ToNormalForm(NormalForm::kNfkc, "\uFB01"), "fi");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfkc, "\u1E9B\u0323"), "\u1E69");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfkd, "\u1E9B\u0323"), "s\u0323\u0307");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfkc, "\uFF21\u2460\u00BD"),
            "A1"
            "1\u20442");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfkd, "\u00E9\u2075"), "e\u03015");
  EXPECT_EQ(ToNormalForm(NormalForm::kNfkc, "\u3300"), "\u30A2\u30D1\u30FC\u30C8");
}

TEST(UnicodeNormalizationTest, LowercaseIsPerCodePoint) {
  EXPECT_EQ(ToLowercase("HELLO World"), "hello world");
  // Rust's char::to_lowercase: no final-sigma context.
  EXPECT_EQ(ToLowercase("\u1F48\u0394\u03A5\u03A3\u03A3\u0395\u038E\u03A3"),
            "\u1F40\u03B4\u03C5\u03C3\u03C3\u03B5\u03CD\u03C3");
  EXPECT_EQ(ToLowercase("\u0130"), "i\u0307");  // the one longer mapping
  EXPECT_EQ(ToLowercase("\u0041\u00C9\u0410\U00010400"), "a\u00E9\u0430\U00010428");
  EXPECT_EQ(ToLowercase("ß 中 1"), "ß 中 1");
}

}  // namespace
}  // namespace lockstep::tok

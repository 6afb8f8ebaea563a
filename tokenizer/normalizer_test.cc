// Normalizer by hand: the types the JavaScript reference lacks (Nmt, ByteLevel), the
// cases where it differs from Hugging Face's Rust library (see
// normalizer_reference_test.cc), and FromJson's errors.
#include "tokenizer/normalizer.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {
namespace {

using std::string_literals::operator""s;

std::string Normalized(const nlohmann::json& config, std::string_view text) {
  absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(config);
  EXPECT_TRUE(normalizer.ok()) << normalizer.status();
  return normalizer.ok() ? normalizer->Normalize(text) : "";
}

TEST(NormalizerTest, UnicodeForms) {
  EXPECT_EQ(Normalized({{"type", "NFKC"}}, "\uFB01ne \u2460"), "fine 1");
  EXPECT_EQ(Normalized({{"type", "NFKD"}}, "\u00E9\uFB01"), "e\u0301fi");
  EXPECT_EQ(Normalized({{"type", "NFD"}}, "\u00E9\uFB01"), "e\u0301\uFB01");
  EXPECT_EQ(Normalized({{"type", "NFC"}}, "e\u0301\uFB01"), "\u00E9\uFB01");
}

TEST(NormalizerTest, LowercaseHasNoFinalSigma) {
  EXPECT_EQ(
      Normalized({{"type", "Lowercase"}}, "HELLO \u1F48\u0394\u03A5\u03A3\u03A3\u0395\u038E\u03A3"),
      "hello \u1F40\u03B4\u03C5\u03C3\u03C3\u03B5\u03CD\u03C3");
}

TEST(NormalizerTest, StripAccentsRemovesEveryMark) {
  const nlohmann::json nfd_strip = {
      {"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}};
  EXPECT_EQ(Normalized(nfd_strip, "H\u00E9ll\u00F2 h\u00F4w are \u00FC?"), "Hello how are u?");
  // Spacing (Mc) and enclosing (Me) marks too.
  EXPECT_EQ(Normalized({{"type", "StripAccents"}}, "\u0915\u093E a\u20DD"), "\u0915 a");
}

TEST(NormalizerTest, BertNormalizerAsRust) {
  const nlohmann::json bert = {{"type", "BertNormalizer"}};  // every option on
  EXPECT_EQ(Normalized(bert, "H\u00E9llo\tW\u00D6RLD\u200B!"), "hello world!");
  // Control and unassigned code points go, U+0000 and U+FFFD too; White_Space is ' '.
  EXPECT_EQ(Normalized(bert, "a\u0000b\uFFFDc\u0378d\U000E0001e\u3000f\u0085g"s), "abcde fg");
  // Ideographs get spaces, beyond U+FFFF too; kana and Hangul do not.
  // (strip_accents decomposes first: Hangul syllables stay as their jamo.)
  EXPECT_EQ(Normalized(bert, "\u4E2D\U00020000\u304B\uD55C"),
            " \u4E2D  \U00020000 \u304B\u1112\u1161\u11AB");
  EXPECT_EQ(Normalized(bert, "\u03A3\u03A3"), "\u03C3\u03C3");
  const nlohmann::json keep_case = {{"type", "BertNormalizer"},
                                    {"lowercase", false},
                                    {"strip_accents", nullptr},
                                    {"handle_chinese_chars", false},
                                    {"clean_text", false}};
  EXPECT_EQ(Normalized(keep_case, "\u00C9\t\u4E2D"), "\u00C9\t\u4E2D");
}

TEST(NormalizerTest, Nmt) {
  EXPECT_EQ(Normalized({{"type", "Nmt"}}, "a\u0001b\u007Fc\td\u200Be\u2581f\uFEFFg\u00A0h"),
            "abc d e f g\u00A0h");
}

TEST(NormalizerTest, ByteLevel) {
  EXPECT_EQ(Normalized({{"type", "ByteLevel"}}, "hello\nworld"), "hello\u010Aworld");
  EXPECT_EQ(Normalized({{"type", "ByteLevel"}}, "a \u00E9"), "a\u0120\u00C3\u00A9");
}

TEST(NormalizerTest, FromJsonErrors) {
  const auto error = [](const nlohmann::json& config) {
    absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(config);
    return normalizer.ok() ? std::string("ok") : std::string(normalizer.status().message());
  };
  EXPECT_EQ(error({{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}}),
            "normalizer type 'Precompiled' is not supported");
  EXPECT_EQ(error({{"type", "BertNormalizer"}, {"lowercase", "yes"}}),
            "normalizer BertNormalizer: field 'lowercase' must be a boolean");
  EXPECT_EQ(
      error({{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Nope"}}}}}),
      "normalizer type 'Nope' is not supported");
}

}  // namespace
}  // namespace lockstep::tok

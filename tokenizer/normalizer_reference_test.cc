// Every normalizer type that the JavaScript reference (@huggingface/tokenizers) also
// implements, against it, on a seeded corpus of tricky strings (testing_corpus.h): the
// normalized text must be identical. Nmt and ByteLevel, which the reference lacks, are
// checked by hand in normalizer_test.cc.
//
// Known differences between the reference and Hugging Face's Rust library, which
// Lockstep follows; inputs that show them are left out here and checked by hand in
// normalizer_test.cc:
// * Lowercase: JavaScript's toLowerCase writes a final capital sigma as U+03C2; Rust
//   lowercases each character alone (U+03C3). Left out: inputs with U+03A3.
// * BertNormalizer clean_text: JavaScript keeps unassigned code points (Cn); Rust drops
//   them as control characters. Left out: inputs with a Cn code point.
// * BertNormalizer handle_chinese_chars: JavaScript looks at UTF-16 units, so it never
//   spaces the ideographs beyond U+FFFF. Left out: inputs with one.
// And one of versions: the reference runs Unicode 17.0, Debian 12's ICU Unicode 15.0.
// Left out: inputs with a code point assigned since (ICU does not know it).
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/icu_properties.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/normalizer_text.h"
#include "tokenizer/testing_corpus.h"
#include "tokenizer/testing_reference.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_normalization.h"

namespace lockstep::tok {
namespace {

constexpr size_t kCorpusSize = 600;

struct Exclusions {
  bool sigma = false, unassigned = false, astral_chinese = false;
};

bool Excluded(std::string_view text, const Exclusions& exclusions) {
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t cp = NextCodePoint(text, &pos);
    if (cp < 0x80) continue;
    if (!IsAssignedInIcu(cp) && CategoryOf(cp) != GeneralCategory::kCn) return true;
    if (exclusions.sigma && cp == 0x3A3) return true;
    if (exclusions.unassigned && CategoryOf(cp) == GeneralCategory::kCn) return true;
    if (exclusions.astral_chinese && cp > 0xFFFF && IsChineseChar(cp)) return true;
  }
  return false;
}

std::string Escaped(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 200)) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7F && c != '\\') {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "\\x%02X", b);
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

void ExpectSameAsReference(const nlohmann::json& config, const Exclusions& exclusions) {
  SCOPED_TRACE(config.dump());
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  absl::StatusOr<testing::Reference> reference = testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<Normalizer> normalizer = Normalizer::FromJson(config);
  ASSERT_TRUE(normalizer.ok()) << normalizer.status();

  std::vector<std::string> inputs;
  for (const std::string& raw : testing::GenerateCorpus(seed, kCorpusSize, {})) {
    std::string text = ToValidUtf8(raw);
    if (!text.empty() && !Excluded(text, exclusions)) inputs.push_back(std::move(text));
  }
  ASSERT_GT(inputs.size(), kCorpusSize / 2) << "too many inputs left out";
  absl::StatusOr<std::vector<nlohmann::json>> expected =
      reference->RunComponent("normalizer", config, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  int mismatches = 0;
  for (size_t i = 0; i < inputs.size() && mismatches < 5; ++i) {
    const std::string want = (*expected)[i].at("text").get<std::string>();
    const std::string got = normalizer->Normalize(inputs[i]);
    if (got != want) {
      ++mismatches;
      ADD_FAILURE() << "input " << i << ": " << Escaped(inputs[i]) << "\n  got:  " << Escaped(got)
                    << "\n  want: " << Escaped(want);
    }
  }
}

TEST(NormalizerReferenceTest, UnicodeForms) {
  for (const char* form : {"NFC", "NFD", "NFKC", "NFKD"}) {
    ExpectSameAsReference({{"type", form}}, {});
  }
}

TEST(NormalizerReferenceTest, Lowercase) {
  ExpectSameAsReference({{"type", "Lowercase"}}, {.sigma = true});
}

TEST(NormalizerReferenceTest, StripAccentsAfterNfd) {
  ExpectSameAsReference(
      {{"type", "Sequence"},
       {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}, {{"type", "NFC"}}}}},
      {});
  ExpectSameAsReference({{"type", "StripAccents"}}, {});
}

TEST(NormalizerReferenceTest, BertNormalizer) {
  const Exclusions all{.sigma = true, .unassigned = true, .astral_chinese = true};
  ExpectSameAsReference({{"type", "BertNormalizer"},
                         {"clean_text", true},
                         {"handle_chinese_chars", true},
                         {"strip_accents", nullptr},
                         {"lowercase", true}},
                        all);
  ExpectSameAsReference({{"type", "BertNormalizer"},
                         {"clean_text", false},
                         {"handle_chinese_chars", false},
                         {"strip_accents", true},
                         {"lowercase", false}},
                        {});
  ExpectSameAsReference({{"type", "BertNormalizer"},
                         {"clean_text", true},
                         {"handle_chinese_chars", true},
                         {"strip_accents", false},
                         {"lowercase", true}},
                        all);
}

}  // namespace
}  // namespace lockstep::tok

// Lockstep's HfTokenizer against the JavaScript reference (@huggingface/tokenizers) on
// five real tokenizer.json files (Llama 3, Qwen 3, Llama 2, Gemma 3, DeepSeek V3): for a
// seeded corpus of 5,000 tricky strings per file, the token ids, the decoded text and
// the ids with special tokens (first 100) must be identical, and streaming decode must
// give the same text at every token. The reference is installed by
// tokenizer/testdata/setup_reference.sh; without it these tests fail.
//
// Known differences between the JavaScript reference and Hugging Face's Rust library,
// which Lockstep follows (the corpus avoids them; see the hand-written cases below):
// * (?i:'s|...) contractions: Oniguruma folds U+017F LONG S and U+212A KELVIN SIGN to
//   s and k; the JavaScript port folds ASCII letters only.
// * ByteFallback decode of an invalid byte run: Rust writes U+FFFD per byte of the run,
//   JavaScript (and Lockstep, to stream exactly) per maximal invalid subsequence.
//   Encoding never produces such runs, so the corpus cannot show it.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/testing_corpus.h"
#include "tokenizer/testing_reference.h"
#include "tokenizer/testing_stream.h"

namespace lockstep::tok {
namespace {

constexpr size_t kCorpusSize = 5000;

std::string Escaped(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 300)) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7F && c != '\\') {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "\\x%02X", b);
    }
  }
  return s.size() > 300 ? out + "..." : out;
}

std::string IdsText(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) absl::StrAppend(&out, i ? "," : "", ids[i]);
  return ids.size() > 40 ? out + ",..." : out;
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, IdsTextAndStreamingMatchTheReference) {
  const std::string name = GetParam();
  const uint64_t seed = lockstep::testing::TestSeed();
  SCOPED_TRACE(lockstep::testing::SeedTrace(seed));
  std::cout << "tokenizer " << name << ": " << lockstep::testing::SeedTrace(seed) << "\n";

  const absl::StatusOr<testing::Reference> reference = testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::string json_path = reference->TokenizerJson(name);
  absl::StatusOr<std::unique_ptr<HfTokenizer>> tokenizer = HfTokenizer::LoadFromFile(json_path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();

  std::vector<std::string> specials;
  for (const AddedToken& t : (*tokenizer)->added_vocabulary().tokens())
    specials.push_back(t.content);
  const std::vector<std::string> corpus = testing::GenerateCorpus(seed, kCorpusSize, specials);
  const absl::StatusOr<std::vector<testing::ReferenceResult>> expected =
      reference->Encode(name, corpus);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->size(), corpus.size());

  int failures = 0;
  size_t bytes = 0, tokens = 0, long_lines = 0;
  const auto report = [&](size_t i, std::string_view what, const std::string& detail) {
    if (++failures <= 8) {
      ADD_FAILURE() << name << " string #" << i << " \"" << Escaped(corpus[i]) << "\": " << what
                    << "\n"
                    << detail;
    }
  };
  for (size_t i = 0; i < corpus.size(); ++i) {
    const testing::ReferenceResult& want = (*expected)[i];
    bytes += corpus[i].size();
    tokens += want.ids.size();
    long_lines += corpus[i].size() >= 10000;
    const std::vector<int32_t> ids = (*tokenizer)->Encode(corpus[i]);
    if (ids != want.ids) {
      report(i, "ids differ",
             absl::StrCat("  lockstep:  ", IdsText(ids), "\n  reference: ", IdsText(want.ids)));
      continue;
    }
    const std::string text = (*tokenizer)->Decode(ids);
    if (text != want.text) {
      report(i, "decoded text differs",
             absl::StrCat("  lockstep:  \"", Escaped(text), "\"\n  reference: \"",
                          Escaped(want.text), "\""));
      continue;
    }
    if (want.has_ids_special && (*tokenizer)->Encode(corpus[i], true) != want.ids_special) {
      report(i, "ids with special tokens differ", "");
      continue;
    }
    const std::string stream_error = testing::CheckStream(**tokenizer, ids, text, ids.size() <= 64);
    if (!stream_error.empty()) report(i, "streaming differs", stream_error);
  }
  std::cout << name << ": compared " << corpus.size() << " strings (" << long_lines
            << " of 10k+ characters), " << bytes << " bytes, " << tokens << " tokens\n";
  EXPECT_EQ(failures, 0) << name << ": " << failures << " of " << corpus.size()
                         << " strings differ";
}

// The corpus leaves out U+017F (see the file comment); here is what Lockstep does with it:
// like Oniguruma, "'\u017F" is a contraction as "'s" is, so "it'\u017Ft" is the words
// "it", "'\u017F", "t" (the JavaScript reference, folding ASCII only, has "it", "'\u017Ft").
TEST(ReferenceKnownDifferenceTest, LongSIsAContractionLikeS) {
  const absl::StatusOr<testing::Reference> reference = testing::FindReference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  const auto tokenizer = HfTokenizer::LoadFromFile(reference->TokenizerJson("llama3"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const auto words = [&](std::vector<std::string_view> words) {
    std::vector<int32_t> ids;
    for (const std::string_view w : words) {
      for (const int32_t id : (*tokenizer)->Encode(w)) ids.push_back(id);
    }
    return ids;
  };
  EXPECT_EQ((*tokenizer)->Encode("it'\u017Ft"), words({"it", "'\u017F", "t"}));
  EXPECT_EQ((*tokenizer)->Encode("it'st"), words({"it", "'s", "t"}));
}

INSTANTIATE_TEST_SUITE_P(Files, ReferenceTest,
                         ::testing::Values("llama3", "qwen3", "llama2", "gemma3", "deepseek_v3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lockstep::tok

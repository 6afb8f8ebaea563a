#include "tokenizer/hf_tokenizer.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string ByteLevel(std::string_view bytes) {
  std::string out;
  AppendByteLevel(bytes, &out);
  return out;
}

// A byte-level BPE: ids 0..255 are the bytes, then merges h+e, he+l, hel+l, hell+o,
// " "+w (and the Llama 3 split pattern, a <|end|> special token, BOS by template).
json ByteLevelConfig() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevel(std::string(1, static_cast<char>(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"he", "l"}, {"hel", "l"}, {"hell", "o"}, {" ", "w"}, {"l", "l"}};
  json merge_list = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back(ByteLevel(a) + " " + ByteLevel(b));
    vocab[ByteLevel(a + b)] = next++;
  }
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
      {"added_tokens",
       {{{"id", 300}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
        {{"id", 301}, {"content", "<bos>"}, {"special", true}, {"normalized", false}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<bos>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
        {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {301}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
  };
}

// A SentencePiece-style BPE with byte fallback, configured like Llama 2's file.
json ByteFallbackConfig() {
  json vocab = {{"<unk>", 0}, {"▁", 259},  {"a", 260},  {"b", 261},
                {"▁a", 262},  {"ab", 263}, {"▁ab", 264}};
  for (int b = 0; b < 256; ++b) vocab[absl::StrFormat("<0x%02X>", b)] = 3 + b;
  return {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"▁ a", "a b", "▁a b"}},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"fuse_unk", true}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
  };
}

std::unique_ptr<HfTokenizer> Load(const json& config) {
  absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::FromJson(config.dump(), "test");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(HfTokenizerTest, ByteLevelMergesSpecialTokensAndTemplate) {
  const auto t = Load(ByteLevelConfig());
  ASSERT_NE(t, nullptr);
  // "hello" merges fully; " world" keeps " w" then single bytes; <|end|> is never split.
  EXPECT_THAT(t->Encode("hello world<|end|>"), ElementsAre(259, 260, 'o', 'r', 'l', 'd', 300));
  EXPECT_THAT(t->Encode("hi", /*add_special_tokens=*/true), ElementsAre(301, 'h', 'i'));
  EXPECT_EQ(t->Decode(t->Encode("hello world<|end|>")), "hello world<|end|>");
  EXPECT_EQ(t->Decode({301, 'h', 'i'}, /*skip_special_tokens=*/true), "hi");
  EXPECT_EQ(t->Decode({'a', 99999, 'b'}), "ab");  // unknown ids are skipped
  EXPECT_EQ(*t->TokenToId("<|end|>"), 300);
  EXPECT_EQ(*t->IdToToken(259), ByteLevel("hello"));
  EXPECT_EQ(t->vocab_size(), 302);
}

// Files whose normalizer is NFKC (or a sequence with it) load and encode normalized text.
TEST(HfTokenizerTest, NfkcNormalizerLoads) {
  json config = ByteLevelConfig();
  config["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}};
  const auto t = Load(config);
  ASSERT_NE(t, nullptr);
  // U+FB01 LATIN SMALL LIGATURE FI and U+FF48 FULLWIDTH H become "fi" and "h".
  EXPECT_EQ(t->Encode("\uFB01 \uFF48ello"), t->Encode("fi hello"));
  EXPECT_THAT(t->Encode("\uFF48ello"), ElementsAre(259));
}

TEST(HfTokenizerTest, LeftmostPairMergesFirstOnTies) {
  const auto t = Load(ByteLevelConfig());
  ASSERT_NE(t, nullptr);
  // "lll": l+l merges at the left pair first.
  const int32_t ll = *t->TokenToId(ByteLevel("ll"));
  EXPECT_THAT(t->Encode("lll"), ElementsAre(ll, 'l'));
}

TEST(HfTokenizerTest, InvalidUtf8BecomesReplacementCharacters) {
  const auto t = Load(ByteLevelConfig());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a\xFF"), t->Encode("a\uFFFD"));
  EXPECT_EQ(t->Decode({'a', 0xE4, 0xB8, 'b'}), "a\uFFFDb");
}

TEST(HfTokenizerTest, StreamingWaitsForWholeCharacters) {
  const auto t = Load(ByteLevelConfig());
  ASSERT_NE(t, nullptr);
  DecodeStream stream = t->NewDecodeStream();
  EXPECT_EQ(stream.Push('a'), "a");
  EXPECT_EQ(stream.Push(0xF0), "");  // 😀 is F0 9F 98 80
  EXPECT_EQ(stream.Push(0x9F), "");
  EXPECT_EQ(stream.Push(0x98), "");
  EXPECT_EQ(stream.Push(0x80), "😀");
  EXPECT_EQ(stream.Push(0xE4), "");
  EXPECT_EQ(stream.Flush(), "\uFFFD");
}

TEST(HfTokenizerTest, ByteFallbackNormalizerAndStripDecoder) {
  const auto t = Load(ByteFallbackConfig());
  ASSERT_NE(t, nullptr);
  // "ab a é" -> "▁ab▁a▁é": é is not in the vocabulary, so its two bytes.
  EXPECT_THAT(t->Encode("ab a é"), ElementsAre(264, 262, 259, 3 + 0xC3, 3 + 0xA9));
  EXPECT_EQ(t->Decode(t->Encode("ab a é")), "ab a é");
  // The leading space the normalizer adds is stripped once, also when streamed.
  DecodeStream stream = t->NewDecodeStream();
  EXPECT_EQ(stream.Push(259), "");
  EXPECT_EQ(stream.Push(262), " a");
  // An invalid byte run: one U+FFFD per maximal invalid subsequence (Rust would write
  // one per byte: "\uFFFD\uFFFDa").
  EXPECT_EQ(t->Decode({3 + 0xE4, 3 + 0xB8, 260}), "\uFFFDa");
}

TEST(HfTokenizerTest, AddedTokensStripAndNormalizedMatching) {
  json config = ByteLevelConfig();
  config["added_tokens"].push_back({{"id", 302},
                                    {"content", "<mask>"},
                                    {"lstrip", true},
                                    {"rstrip", true},
                                    {"special", true},
                                    {"normalized", false}});
  const auto t = Load(config);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("a  <mask>  b"), ElementsAre('a', 302, 'b'));
}

TEST(HfTokenizerTest, UnsupportedComponentsFailNamingThem) {
  const auto expect_error = [](json config, const std::string& message) {
    const auto t = HfTokenizer::FromJson(config.dump(), "x.json");
    ASSERT_FALSE(t.ok()) << message;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(message));
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("x.json"));
  };
  json config = ByteLevelConfig();
  config["model"]["type"] = "WordPiece";
  expect_error(config, "model type 'WordPiece' is not supported");
  config = ByteLevelConfig();
  config["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}};
  expect_error(config, "normalizer type 'Precompiled' is not supported");
  config = ByteLevelConfig();
  config["decoder"] = {{"type", "CTC"}};
  expect_error(config, "decoder type 'CTC' is not supported");
  config = ByteLevelConfig();
  config["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_error(config, "post_processor type 'RobertaProcessing' is not supported");
  config = ByteLevelConfig();
  config["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\w+)";
  expect_error(config, "the escape '\\w' is not supported");
  config = ByteLevelConfig();
  config["added_tokens"][0]["single_word"] = true;
  expect_error(config, "single_word");
  config = ByteLevelConfig();
  config["model"]["merges"].push_back("zz qq");
  expect_error(config, "outside the vocabulary");
  EXPECT_FALSE(HfTokenizer::FromJson("{", "x.json").ok());
  EXPECT_EQ(HfTokenizer::LoadFromFile("/nonexistent/tokenizer.json").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HfTokenizerTest, MetaspaceDecoderDropsTheFirstTokensReplacements) {
  json config = ByteFallbackConfig();
  config.erase("normalizer");
  config["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  config["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  const auto t = Load(config);
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("ab a"), ElementsAre(264, 262));
  EXPECT_EQ(t->Decode({264, 262}), "ab a");
  // As Hugging Face's Rust decoder: every ▁ of the first token goes, not only one.
  EXPECT_EQ(t->Decode({259, 259}), " ");
}

// Found by fuzzing (fuzz/corpus/hf_tokenizer_fuzzer/regression_special_id_outside_vocab):
// a template naming an id the vocabulary lacks would hand the engine an id with no
// embedding; loading fails instead, naming the id.
TEST(HfTokenizerTest, ATemplateSpecialTokenOutsideTheVocabularyFailsLoading) {
  json config = ByteLevelConfig();
  config.erase("added_tokens");  // <bos> (301) is gone; the template still names it
  absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::FromJson(config.dump(), "test");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("special token id 301 is outside the vocabulary"));
  config["post_processor"]["special_tokens"]["<bos>"]["ids"] = {-1};
  t = HfTokenizer::FromJson(config.dump(), "test");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("special token id -1"));
}

// Found by fuzzing (fuzz/corpus/hf_tokenizer_fuzzer/regression_huge_vocab_id): an id
// of hundreds of millions made loading allocate a slot for every id below it (tens of
// seconds and gigabytes); ids beyond kMaxTokenId are refused at once.
TEST(HfTokenizerTest, AnIdFarBeyondAnyVocabularyFailsLoading) {
  json config = ByteLevelConfig();
  config["model"]["vocab"]["E"] = 696666666;
  absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::FromJson(config.dump(), "test");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("vocab entry 'E' needs an id in [0, 4194303], got 696666666"));
  config = ByteLevelConfig();
  config["added_tokens"][0]["id"] = kMaxTokenId + 1;
  t = HfTokenizer::FromJson(config.dump(), "test");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("added_tokens: '<|end|>' needs an id in"));
  // The largest allowed id loads.
  config = ByteLevelConfig();
  config["added_tokens"][0]["id"] = kMaxTokenId;
  config["post_processor"] = nullptr;
  EXPECT_TRUE(HfTokenizer::FromJson(config.dump(), "test").ok());
}

}  // namespace
}  // namespace lockstep::tok

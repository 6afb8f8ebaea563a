#include "grammar/model_vocabulary.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::grammar {
namespace {

using nlohmann::json;

std::string NewDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(ModelVocabularyTest, ByteLevelTokenizerIdsAreBytesAndTheRestIsNotText) {
  const std::string dir = NewDir("byte");
  Write(dir + "/lockstep_tokenizer.json",
        R"({"type": "byte_level", "vocab_size": 260, "bos_token_id": 256, "eos_token_id": 257})");
  absl::StatusOr<std::shared_ptr<const Vocabulary>> v = LoadModelVocabulary(dir, 300, 257);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ((*v)->token_bytes.size(), 300u);
  EXPECT_EQ((*v)->token_bytes['a'], "a");
  EXPECT_EQ((*v)->token_bytes[0xff], "\xff");
  EXPECT_EQ((*v)->token_bytes[256], "");
  EXPECT_EQ((*v)->token_bytes[299], "");
  EXPECT_EQ((*v)->stop_tokens, std::vector<int32_t>{257});

  // The model's vocabulary cannot be smaller than the tokenizer's.
  v = LoadModelVocabulary(dir, 259, 257);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("the tokenizer has 260 ids, the model only 259"),
            std::string::npos)
      << v.status();
  EXPECT_FALSE(LoadModelVocabulary(dir, 300, 300).ok());  // EOS outside
  EXPECT_FALSE(LoadModelVocabulary(NewDir("empty"), 300, 257).ok());
}

TEST(ModelVocabularyTest, HuggingFaceTokensDecodeToTheirBytesAndSpecialTokensToNothing) {
  json vocab = {{"<unk>", 0}, {"</s>", 1}, {"<s>", 2}, {"▁", 259}, {"a", 260}, {"▁ab", 261}};
  for (int b = 0; b < 256; ++b) vocab[absl::StrFormat("<0x%02X>", b)] = 3 + b;
  const json config = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array()},
        {"unk_token", "<unk>"},
        {"byte_fallback", true}}},
      {"added_tokens",
       {{{"id", 1}, {"content", "</s>"}, {"special", true}, {"single_word", false},
         {"lstrip", false}, {"rstrip", false}, {"normalized", false}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}}}}}},
  };
  const std::string dir = NewDir("hf");
  Write(dir + "/tokenizer.json", config.dump());
  absl::StatusOr<std::shared_ptr<const Vocabulary>> v = LoadModelVocabulary(dir, 264, 1);
  ASSERT_TRUE(v.ok()) << v.status();
  const std::vector<std::string>& bytes = (*v)->token_bytes;
  ASSERT_EQ(bytes.size(), 264u);
  EXPECT_EQ(bytes[1], "");  // </s>, the stop token
  EXPECT_EQ(bytes[3 + '{'], "{");
  EXPECT_EQ(bytes[3 + 0xe9], "\xe9");  // one byte of a character
  EXPECT_EQ(bytes[259], " ");
  EXPECT_EQ(bytes[261], " ab");
  EXPECT_EQ(bytes[263], "");  // beyond the tokenizer
  EXPECT_EQ((*v)->stop_tokens, std::vector<int32_t>{1});
}

}  // namespace
}  // namespace lockstep::grammar

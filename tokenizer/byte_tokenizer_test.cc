#include "tokenizer/byte_tokenizer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::tok {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGood[] =
    R"({"type": "byte_level", "vocab_size": 320, "bos_token_id": 256, "eos_token_id": 257})";

TEST(ByteTokenizerTest, ParsesTheFile) {
  absl::StatusOr<ByteTokenizer> tokenizer = ByteTokenizer::FromJson(kGood, "t.json");
  ASSERT_THAT(tokenizer, IsOk());
  EXPECT_EQ(tokenizer->vocab_size(), 320);
  EXPECT_EQ(tokenizer->bos_token_id(), 256);
  EXPECT_EQ(tokenizer->eos_token_id(), 257);
}

TEST(ByteTokenizerTest, RoundTripsUtf8AndArbitraryBytes) {
  ByteTokenizer tokenizer = *ByteTokenizer::Create(258, 256, 257);
  EXPECT_THAT(tokenizer.Encode("hi\n"), ElementsAre('h', 'i', '\n'));
  const std::string text = "Grüße, 世界! 😀";
  std::vector<int32_t> ids = tokenizer.Encode(text);
  EXPECT_EQ(ids.size(), text.size());
  for (int32_t id : ids) EXPECT_TRUE(ByteTokenizer::IsByteToken(id));
  EXPECT_EQ(tokenizer.Decode(ids), text);
  const std::string binary("\x00\x01\x7F", 3);
  EXPECT_EQ(tokenizer.TokenBytes(tokenizer.Encode(binary)), binary);
}

TEST(ByteTokenizerTest, SpecialAndOutOfRangeIdsDecodeToNothing) {
  ByteTokenizer tokenizer = *ByteTokenizer::Create(300, 256, 257);
  EXPECT_EQ(tokenizer.Decode({256, 'o', 257, 'k', 299, -1, 1000}), "ok");
  EXPECT_EQ(tokenizer.TokenBytes({256, 257}), "");
}

TEST(ByteTokenizerTest, DecodeReplacesInvalidUtf8) {
  ByteTokenizer tokenizer = *ByteTokenizer::Create(258, 256, 257);
  EXPECT_EQ(tokenizer.Decode({'a', 0xFF, 0xC3}), "a\xEF\xBF\xBD\xEF\xBF\xBD");
}

struct BadFile {
  std::string json;
  std::string message;
};

class BadFileTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadFileTest, SaysWhatIsWrong) {
  EXPECT_THAT(ByteTokenizer::FromJson(GetParam().json, "model/lockstep_tokenizer.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("model/lockstep_tokenizer.json"),
                                        HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    Files, BadFileTest,
    ::testing::Values(
        BadFile{"{", "not valid JSON"}, BadFile{"[1, 2]", "must be a JSON object"},
        BadFile{R"({"type": "bpe", "vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257})",
                R"('type' must be "byte_level", got "bpe")"},
        BadFile{R"({"vocab_size": 300, "bos_token_id": 256, "eos_token_id": 257})", "'type'"},
        BadFile{R"({"type": "byte_level", "bos_token_id": 256, "eos_token_id": 257})",
                "'vocab_size' is missing"},
        BadFile{R"({"type": "byte_level", "vocab_size": "300", "bos_token_id": 256,
                    "eos_token_id": 257})",
                R"('vocab_size' must be an integer, got "300")"},
        BadFile{R"({"type": "byte_level", "vocab_size": 200, "bos_token_id": 256,
                    "eos_token_id": 257})",
                "vocab_size must be >= 258"},
        BadFile{R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 12,
                    "eos_token_id": 257})",
                "bos_token_id must be in [256, vocab_size=300), got 12"},
        BadFile{R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 256,
                    "eos_token_id": 256})",
                "must differ"},
        BadFile{R"({"type": "byte_level", "vocab_size": 300, "bos_token_id": 256,
                    "eos_token_id": 257, "merges": []})",
                "unknown key 'merges'"}));

TEST(ByteTokenizerTest, LoadsFromAModelDirectory) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "byte_tokenizer_test_model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / kTokenizerFileName) << kGood;
  absl::StatusOr<ByteTokenizer> tokenizer = ByteTokenizer::LoadFromModelDir(dir.string());
  ASSERT_THAT(tokenizer, IsOk());
  EXPECT_EQ(tokenizer->vocab_size(), 320);
  EXPECT_THAT(ByteTokenizer::LoadFromModelDir((dir / "missing").string()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("lockstep_tokenizer.json")));
}

}  // namespace
}  // namespace lockstep::tok

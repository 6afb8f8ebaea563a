#include "tokenizer/rust_decode.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/testing/seed.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_level.h"

namespace lockstep::tok {
namespace {

using json = nlohmann::json;

// Byte token b is id kByte + b.
constexpr int32_t kByte = 3;
constexpr int32_t kA = 260;       // "a"
constexpr int32_t kSpaceA = 262;  // "▁a"
constexpr int32_t kBos = 1;       // "<s>", special

// Llama 2's layout: a SentencePiece-style BPE with byte fallback, its decoder
// Replace(▁ -> " "), ByteFallback, Fuse, Strip(1 leading space).
std::unique_ptr<HfTokenizer> ByteFallbackTokenizer() {
  json vocab = {{"<unk>", 0}, {"<s>", kBos}, {"</s>", 2},    {"▁", 259},
                {"a", kA},    {"b", 261},    {"▁a", kSpaceA}};
  for (int b = 0; b < 256; ++b) vocab[absl::StrFormat("<0x%02X>", b)] = kByte + b;
  const json config = {
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", {"▁ a"}},
        {"unk_token", "<unk>"},
        {"byte_fallback", true}}},
      {"added_tokens",
       {{{"id", kBos}, {"content", "<s>"}, {"special", true}, {"normalized", false}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
  };
  absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::FromJson(config.dump(), "test");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

// A byte-level BPE: ids 0..255 are the bytes.
std::unique_ptr<HfTokenizer> ByteLevelTokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string token;
    AppendByteLevel(std::string(1, static_cast<char>(b)), &token);
    vocab[token] = b;
  }
  const json config = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
                       {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
                       {"decoder", {{"type", "ByteLevel"}}}};
  absl::StatusOr<std::unique_ptr<HfTokenizer>> t = HfTokenizer::FromJson(config.dump(), "test");
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

std::vector<int32_t> Bytes(std::initializer_list<int> bytes) {
  std::vector<int32_t> ids;
  for (const int b : bytes) ids.push_back(kByte + b);
  return ids;
}

constexpr char kFffd[] = "\uFFFD";

// tokenizers' own cases (decoders/byte_fallback.rs) and the issue's [<0xF0>, <0x9F>].
TEST(RustDecodeTest, AnInvalidByteRunIsOneReplacementPerByte) {
  const auto t = ByteFallbackTokenizer();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(RustDecode(*t, Bytes({0xF0, 0x9F})), std::string(kFffd) + kFffd);
  EXPECT_EQ(t->Decode(Bytes({0xF0, 0x9F})), kFffd);  // streaming's rule
  EXPECT_EQ(RustDecode(*t, Bytes({0xE5})), kFffd);
  EXPECT_EQ(RustDecode(*t, Bytes({0xE5, 0x8F, 0xAB})), "叫");
  std::vector<int32_t> ids = Bytes({0xE5, 0x8F, 0xAB});
  ids.push_back(kA);
  EXPECT_EQ(RustDecode(*t, ids), "叫a");
  ids = Bytes({0xE5, 0x8F});
  ids.push_back(kA);
  EXPECT_EQ(RustDecode(*t, ids), std::string(kFffd) + kFffd + "a");
  // The whole run is replaced, its valid bytes too.
  EXPECT_EQ(RustDecode(*t, Bytes({'A', 0xF0})), std::string(kFffd) + kFffd);
  EXPECT_EQ(t->Decode(Bytes({'A', 0xF0})), std::string("A") + kFffd);
  // A byte-order mark is kept.
  EXPECT_EQ(RustDecode(*t, Bytes({0xEF, 0xBB, 0xBF})), "\uFEFF");
}

TEST(RustDecodeTest, RunsEndAtOtherTokensNotAtSkippedOnes) {
  const auto t = ByteFallbackTokenizer();
  ASSERT_NE(t, nullptr);
  const std::vector<int32_t> ids = {kByte + 0xE5, kBos, kByte + 0x8F, kByte + 0xAB};
  // <s> splits the character: two runs, each invalid.
  EXPECT_EQ(RustDecode(*t, ids), std::string(kFffd) + "<s>" + kFffd + kFffd);
  // Skipped, it does not: one valid run.
  EXPECT_EQ(RustDecode(*t, ids, /*skip_special_tokens=*/true), "叫");
  // Ids without a token are dropped; the leading space is stripped once.
  EXPECT_EQ(RustDecode(*t, {99999, kSpaceA, kSpaceA}), "a a");
}

// Seeded random sequences whose byte runs are whole characters decode as Decode does.
TEST(RustDecodeTest, ValidSequencesDecodeAsDecodeDoes) {
  const uint64_t seed = testing::TestSeed();
  SCOPED_TRACE(testing::SeedTrace(seed));
  std::mt19937_64 rng(seed);
  const auto fallback = ByteFallbackTokenizer();
  const auto level = ByteLevelTokenizer();
  ASSERT_NE(fallback, nullptr);
  ASSERT_NE(level, nullptr);
  const std::vector<std::string> chars = {"x", "é", "叫", "😀", " "};
  for (int i = 0; i < 300; ++i) {
    std::vector<int32_t> ids;
    for (int n = static_cast<int>(rng() % 8); n > 0; --n) {
      switch (rng() % 4) {
        case 0:
          ids.push_back(kA);
          break;
        case 1:
          ids.push_back(kSpaceA);
          break;
        case 2:
          ids.push_back(kBos);
          break;
        default:
          for (const char c : chars[rng() % chars.size()]) {
            ids.push_back(kByte + static_cast<unsigned char>(c));
          }
      }
    }
    SCOPED_TRACE(absl::StrJoin(ids, ","));
    ASSERT_EQ(RustDecode(*fallback, ids), fallback->Decode(ids));
    ASSERT_EQ(RustDecode(*fallback, ids, true), fallback->Decode(ids, true));
    // ByteLevel: any bytes, valid or not, decode alike (from_utf8_lossy).
    std::vector<int32_t> bytes;
    for (int n = static_cast<int>(rng() % 8); n > 0; --n) {
      bytes.push_back(static_cast<int>(rng() % 256));
    }
    SCOPED_TRACE(absl::StrJoin(bytes, ","));
    ASSERT_EQ(RustDecode(*level, bytes), level->Decode(bytes));
  }
}

}  // namespace
}  // namespace lockstep::tok

// Decoder by hand: the WordPiece decoder (Hugging Face's Rust examples) and the decoder
// types that stay unsupported.
#include "tokenizer/decoder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {
namespace {

std::string Decoded(const nlohmann::json& config, const std::vector<std::string>& tokens) {
  absl::StatusOr<Decoder> decoder = Decoder::FromJson(config);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok()) return "";
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) decoder->AppendTokenBytes(tokens[i], i, &out);
  return out;
}

TEST(DecoderTest, WordPiece) {
  const nlohmann::json no_cleanup = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", false}};
  EXPECT_EQ(Decoded(no_cleanup, {"##uelo", "Ara", "##\u00FAj", "##o", "No", "##guera"}),
            "##uelo Ara\u00FAjo Noguera");
  const nlohmann::json cleanup = {{"type", "WordPiece"}};  // prefix "##", cleanup on
  EXPECT_EQ(Decoded(cleanup, {"I", "do", "not", "think", "so", ",", "they", "'", "re", "n't", "!"}),
            "I do not think so, they ' ren't!");
  EXPECT_EQ(Decoded(cleanup, {"you", "'", "ve", "play", "##ing", "?"}), "you ' ve playing?");
  EXPECT_EQ(Decoded(cleanup, {"a", "do not"}), "a don't");
}

TEST(DecoderTest, CrossTokenDecodersAreRefused) {
  for (const char* type : {"BPEDecoder", "CTC"}) {
    absl::StatusOr<Decoder> decoder = Decoder::FromJson({{"type", type}});
    ASSERT_FALSE(decoder.ok()) << type;
    EXPECT_EQ(decoder.status().message(),
              std::string("decoder type '") + type + "' is not supported");
  }
}

}  // namespace
}  // namespace lockstep::tok

#include "runtime/router/text/generated_text.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/router/text/serving_tokenizer.h"
#include "tokenizer/byte_tokenizer.h"

namespace lockstep::router {
namespace {

const ServingTokenizer& Tokenizer() {
  static const ServingTokenizer tokenizer(*tok::ByteTokenizer::Create(300, 256, 257));
  return tokenizer;
}

// The longest proper prefix of `stop` that `text` ends with.
size_t HeldBack(const std::string& text, const std::string& stop) {
  for (size_t k = std::min(stop.size() - 1, text.size()); k > 0; --k) {
    if (text.compare(text.size() - k, k, stop, 0, k) == 0) return k;
  }
  return 0;
}

// Byte tokens make every split of the text a split between tokens, including splits
// inside a character of the stop string. For every way to cut the tokens into three
// deltas: the text streamed after each delta is exactly the complete characters so far
// minus the tail that could begin the stop string; the stop string and what follows
// never appear; generation stops with the delta holding the stop string's last byte.
TEST(GeneratedTextTest, StopStringAtEverySplitAcrossTokensAndChunks) {
  const std::string stop = "\xC3\xA9nd\n";  // "énd\n"
  const std::string before = "caf\xC3\xA9 ";
  const std::string text = before + stop + "tail";
  const std::vector<int32_t> ids = Tokenizer().Encode(text);
  const size_t stop_end = before.size() + stop.size();
  for (size_t i = 0; i <= ids.size(); ++i) {
    for (size_t j = i; j <= ids.size(); ++j) {
      SCOPED_TRACE(testing::Message() << "cuts at " << i << " and " << j);
      GeneratedText generated(Tokenizer(), {stop});
      std::string streamed;
      size_t fed = 0;
      bool stopped = false;
      for (size_t end : {i, j, ids.size()}) {
        streamed += generated.Push(absl::MakeConstSpan(ids).subspan(fed, end - fed));
        fed = end;
        if (fed >= stop_end) {
          ASSERT_TRUE(generated.stopped());
          stopped = true;
          break;
        }
        ASSERT_FALSE(generated.stopped());
        // Complete characters so far: a trailing lead byte of "é" is not yet text.
        std::string complete = text.substr(0, fed);
        if (!complete.empty() && static_cast<unsigned char>(complete.back()) == 0xC3) {
          complete.pop_back();
        }
        EXPECT_EQ(streamed, complete.substr(0, complete.size() - HeldBack(complete, stop)));
      }
      ASSERT_TRUE(stopped);
      streamed += generated.Finish();
      EXPECT_EQ(streamed, before);
    }
  }
}

TEST(GeneratedTextTest, WithoutAStopStringFinishReturnsTheHeldText) {
  GeneratedText generated(Tokenizer(), {"xyz"});
  std::string out = generated.Push(Tokenizer().Encode("abx"));
  EXPECT_EQ(out, "ab");
  out += generated.Push(Tokenizer().Encode("y"));
  EXPECT_EQ(out, "ab");
  out += generated.Push({257});  // EOS: no text
  out += generated.Finish();
  EXPECT_EQ(out, "abxy");
  EXPECT_FALSE(generated.stopped());
}

TEST(GeneratedTextTest, AnUnfinishedCharacterAtTheEndIsReplacedNotSplit) {
  GeneratedText generated(Tokenizer(), {});
  EXPECT_EQ(generated.Push({'a', 0xE2, 0x82}), "a");
  EXPECT_EQ(generated.Finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace lockstep::router

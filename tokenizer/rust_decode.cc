#include "tokenizer/rust_decode.h"

#include <string_view>

#include "tokenizer/decoder.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::tok {
namespace {

// Whether `token` ("<0xHH>") became the single byte HH: the decoder's ByteFallback
// stage took it for a byte token (a ByteLevel stage or none would keep six bytes).
bool IsByteToken(std::string_view token, std::string_view bytes) {
  return bytes.size() == 1 && FallbackByte(token) == static_cast<unsigned char>(bytes[0]);
}

}  // namespace

std::string RustDecode(const HfTokenizer& tokenizer, absl::Span<const int32_t> ids,
                       bool skip_special_tokens) {
  const Decoder& decoder = tokenizer.decoder();
  std::string bytes;  // every token's contribution, byte runs resolved
  std::string run;    // the current run of byte tokens
  const auto end_run = [&bytes, &run] {
    if (IsValidUtf8(run)) {
      bytes += run;
    } else {
      for (size_t i = 0; i < run.size(); ++i) bytes += kReplacementChar;
    }
    run.clear();
  };
  std::string piece;
  size_t index = 0;  // as DecodeStream counts: the tokens decoded so far
  for (const int32_t id : ids) {
    // Ids without a token and skipped special tokens are dropped before the decoder
    // sees the sequence, so they do not end a run.
    const std::string* token = tokenizer.IdToToken(id);
    if (token == nullptr || (skip_special_tokens && tokenizer.IsSpecial(id))) continue;
    piece.clear();
    decoder.AppendTokenBytes(*token, index++, &piece);
    if (IsByteToken(*token, piece)) {
      run += piece;
      continue;
    }
    end_run();
    bytes += piece;
  }
  end_run();
  Utf8StreamDecoder utf8;  // ByteLevel's bytes: String::from_utf8_lossy
  std::string text = utf8.Push(bytes) + utf8.Flush();
  // The decoder's Strip of the whole text: up to strip_count() leading strip_char()s.
  size_t cut = 0;
  for (size_t stripped = 0; stripped < decoder.strip_count() && cut < text.size(); ++stripped) {
    size_t next = cut;
    if (NextCodePoint(text, &next) != decoder.strip_char()) break;
    cut = next;
  }
  return text.erase(0, cut);
}

}  // namespace lockstep::tok

// Turns a byte stream into valid UTF-8 text, piece by piece, never splitting a
// character: bytes of a character whose end has not arrived yet are held back until
// it does. Invalid bytes (a bad lead byte, a broken or overlong sequence, a surrogate)
// become U+FFFD, one per maximal invalid subpart, as the Unicode standard recommends.
//
//   Utf8StreamDecoder decoder;
//   send(decoder.Push("h\xC3"));   // "h"
//   send(decoder.Push("\xA9"));    // "é"
//   send(decoder.Flush());         // "" (or U+FFFD for an unfinished character)
//
// Thread-compatible value type.
#ifndef LOCKSTEP_TOKENIZER_UTF8_STREAM_DECODER_H_
#define LOCKSTEP_TOKENIZER_UTF8_STREAM_DECODER_H_

#include <string>
#include <string_view>

namespace lockstep::tok {

// U+FFFD REPLACEMENT CHARACTER in UTF-8.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

class Utf8StreamDecoder {
 public:
  // Returns the complete characters now available (valid UTF-8; may be empty).
  std::string Push(std::string_view bytes);

  // Ends the stream: an unfinished character held back becomes U+FFFD.
  std::string Flush();

  // Bytes held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_UTF8_STREAM_DECODER_H_

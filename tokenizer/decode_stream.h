// Incremental detokenization: token ids in, text out as soon as it is final. A token
// that ends inside a multi-byte character emits nothing until the character is whole;
// invalid byte sequences become U+FFFD as in HfTokenizer::Decode, and the leading
// characters the decoder strips are held back until it is clear they are stripped.
// The concatenation of every Push and the Flush equals Decode of all the ids.
//
//   DecodeStream stream = tokenizer->NewDecodeStream();
//   for (int32_t id : ids) out += stream.Push(id);
//   out += stream.Flush();
//
// A value type bound to its tokenizer; not thread-safe (one stream per request).
#ifndef LOCKSTEP_TOKENIZER_DECODE_STREAM_H_
#define LOCKSTEP_TOKENIZER_DECODE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::tok {

class HfTokenizer;

class DecodeStream {
 public:
  DecodeStream(const HfTokenizer* tokenizer, bool skip_special_tokens)
      : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // The text that `id` completes (valid UTF-8, maybe empty).
  std::string Push(int32_t id);

  // Ends the stream: a character still unfinished becomes U+FFFD.
  std::string Flush();

 private:
  // Drops the decoder's leading strip characters from the start of the text.
  std::string Strip(std::string text);

  const HfTokenizer* tokenizer_;
  bool skip_special_tokens_;
  size_t index_ = 0;     // tokens decoded so far
  size_t stripped_ = 0;  // leading characters stripped so far
  bool strip_done_ = false;
  std::string bytes_;  // scratch
  Utf8StreamDecoder utf8_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_DECODE_STREAM_H_

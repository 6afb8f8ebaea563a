// The "decoder" of a tokenizer.json, split into what each token contributes on its own
// (so decoding can stream) and what applies to the whole text. Per token, in order:
// Replace (string pattern), Strip (before a Fuse), Metaspace, WordPiece (its prefix
// joins a token to the previous one, other tokens get a space; `cleanup` applies
// Hugging Face's per-token clean-up of spaces before punctuation); then at most one byte
// stage: ByteLevel (the token's code points are bytes) or ByteFallback ("<0xHH>" is the
// byte HH). Fuse concatenates (as streaming does anyway); a Strip after Fuse removes
// leading characters of the whole text (`stop` must be 0). Without a decoder, tokens
// are joined with spaces. Other decoders or orders fail FromJson, naming them: BPEDecoder
// and CTC, which look past the token (at the last token, at the previous one), are
// not supported.
//
// All bytes go through one UTF-8 decoder that turns each maximal invalid subsequence
// into U+FFFD (see DecodeStream). Hugging Face's ByteFallback instead writes one U+FFFD
// per byte of a run of byte tokens that is not valid UTF-8 as a whole; the difference
// shows only for invalid byte runs, and this choice keeps streaming equal to Decode.
//
// Immutable after construction; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_DECODER_H_
#define LOCKSTEP_TOKENIZER_DECODER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {

class Decoder {
 public:
  // `config` may be null.
  static absl::StatusOr<Decoder> FromJson(const nlohmann::json& config);

  // Appends the bytes `token` (a vocabulary string) contributes; `index` is its position
  // in the decoded sequence (Metaspace treats the first token differently).
  void AppendTokenBytes(std::string_view token, size_t index, std::string* out) const;

  // Leading characters to strip from the whole text: up to `strip_count()` copies of
  // `strip_char()` (a code point).
  size_t strip_count() const { return strip_count_; }
  char32_t strip_char() const { return strip_char_; }

 private:
  struct Step {
    enum class Kind { kReplace, kStrip, kMetaspace, kWordPiece };
    Kind kind;
    // kReplace; kMetaspace: `from` is the replacement character; kWordPiece: the prefix
    std::string from, to;
    char32_t strip_char = ' ';
    size_t start = 0, stop = 0;  // kStrip
    bool prepend = true;         // kMetaspace: prepend_scheme is not "never"
    bool cleanup = true;         // kWordPiece
  };
  enum class ByteStage { kNone, kByteLevel, kByteFallback };

  absl::Status Add(const nlohmann::json& config);
  static void ApplyStep(const Step& step, size_t index, std::string* token);

  std::vector<Step> steps_;
  ByteStage byte_stage_ = ByteStage::kNone;
  bool fused_ = false;
  bool join_with_spaces_ = false;  // no decoder at all
  size_t strip_count_ = 0;
  char32_t strip_char_ = ' ';
};

// The byte of a ByteFallback token "<0xHH>" (either hex case), or -1 for any other token.
int FallbackByte(std::string_view token);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_DECODER_H_

// The byte-level tokenizer of Lockstep models: token ids 0..255 are the bytes 0..255;
// ids from 256 up are special (BOS, EOS, unused) and decode to nothing.
//
// A model directory holds `lockstep_tokenizer.json`, exactly
//   {"type": "byte_level", "vocab_size": V, "bos_token_id": 256, "eos_token_id": 257}
// with V >= 258 and BOS, EOS distinct ids in [256, V).
//
//   ASSIGN_OR_RETURN(ByteTokenizer tokenizer, ByteTokenizer::LoadFromModelDir(dir));
//   std::vector<int32_t> ids = tokenizer.Encode("héllo");  // 6 ids, no BOS
//   std::string text = tokenizer.Decode(ids);               // "héllo"
//
// For streaming, feed `TokenBytes(new_ids)` to a Utf8StreamDecoder so that chunks never
// split a character. Immutable after construction; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_BYTE_TOKENIZER_H_
#define LOCKSTEP_TOKENIZER_BYTE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace lockstep::tok {

inline constexpr char kTokenizerFileName[] = "lockstep_tokenizer.json";

class ByteTokenizer {
 public:
  // Checks the ids (see the file comment).
  static absl::StatusOr<ByteTokenizer> Create(int32_t vocab_size, int32_t bos_token_id,
                                              int32_t eos_token_id);
  // Parses the JSON text of a tokenizer file; `source` names it in errors.
  static absl::StatusOr<ByteTokenizer> FromJson(std::string_view json, std::string_view source);
  // Reads `<model_dir>/lockstep_tokenizer.json`.
  static absl::StatusOr<ByteTokenizer> LoadFromModelDir(const std::string& model_dir);

  // One id per byte of `text` (any bytes, UTF-8 or not); no BOS is added.
  std::vector<int32_t> Encode(std::string_view text) const;

  // The bytes of the byte tokens in `ids`; special and out-of-range ids are skipped.
  std::string TokenBytes(absl::Span<const int32_t> ids) const;

  // TokenBytes as valid UTF-8: invalid or unfinished sequences become U+FFFD.
  std::string Decode(absl::Span<const int32_t> ids) const;

  static bool IsByteToken(int32_t id) { return id >= 0 && id < 256; }

  int32_t vocab_size() const { return vocab_size_; }
  int32_t bos_token_id() const { return bos_token_id_; }
  int32_t eos_token_id() const { return eos_token_id_; }

 private:
  ByteTokenizer(int32_t vocab_size, int32_t bos, int32_t eos)
      : vocab_size_(vocab_size), bos_token_id_(bos), eos_token_id_(eos) {}

  int32_t vocab_size_;
  int32_t bos_token_id_;
  int32_t eos_token_id_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_BYTE_TOKENIZER_H_

// A Hugging Face `tokenizer.json` of a BPE model: byte-level BPE (GPT-2, Llama 3, Qwen,
// DeepSeek) and SentencePiece-style BPE with byte fallback (Llama 2, Mistral, Gemma).
//
//   ASSIGN_OR_RETURN(auto tokenizer, HfTokenizer::LoadFromFile(dir + "/tokenizer.json"));
//   std::vector<int32_t> ids = tokenizer->Encode("Hello<|eot_id|>");
//   std::string text = tokenizer->Decode(ids);
//   DecodeStream stream = tokenizer->NewDecodeStream();
//   for (int32_t id : generated) send(stream.Push(id));
//   send(stream.Flush());
//
// Encoding follows the Rust `tokenizers` library: invalid UTF-8 in the input first
// becomes U+FFFD; added tokens are cut out (raw-text ones, then normalized ones in the
// normalized pieces); each piece is normalized (normalizer.h), split into words
// (pre_tokenizer.h) and tokenized by the model (bpe_model.h); the post-processor adds
// special tokens when asked. `truncation` and `padding` are ignored. Unsupported
// component types fail loading with an error naming them.
//
// Immutable after loading (apart from the model's internal cache); thread-safe.
#ifndef LOCKSTEP_TOKENIZER_HF_TOKENIZER_H_
#define LOCKSTEP_TOKENIZER_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace lockstep::tok {

class HfTokenizer {
 public:
  // Parses the text of a tokenizer.json; `source` names it in errors.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(std::string_view json,
                                                               std::string_view source);
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> LoadFromFile(const std::string& path);

  // The ids of `text` (any bytes); with `add_special_tokens`, the post-processor's
  // special tokens too (e.g. BOS).
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = false) const;

  // The text of `ids` (valid UTF-8). Unknown ids are skipped, and special tokens too
  // with `skip_special_tokens`.
  std::string Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Incremental Decode (decode_stream.h). The stream must not outlive the tokenizer.
  DecodeStream NewDecodeStream(bool skip_special_tokens = false) const {
    return DecodeStream(this, skip_special_tokens);
  }

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The vocabulary string of `id` (added tokens included), or nullptr.
  const std::string* IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // One past the largest id.
  int32_t vocab_size() const;

  const AddedVocabulary& added_vocabulary() const { return added_; }
  const Decoder& decoder() const { return decoder_; }

 private:
  HfTokenizer(Normalizer normalizer, PreTokenizer pre_tokenizer, std::unique_ptr<BpeModel> model,
              AddedVocabulary added, PostProcessor post_processor, Decoder decoder)
      : normalizer_(std::move(normalizer)),
        pre_tokenizer_(std::move(pre_tokenizer)),
        model_(std::move(model)),
        added_(std::move(added)),
        post_processor_(std::move(post_processor)),
        decoder_(std::move(decoder)) {}

  // Tokenizes a piece between raw-text added tokens.
  void EncodePiece(std::string_view piece, bool at_input_start, std::vector<int32_t>* ids) const;

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  AddedVocabulary added_;
  PostProcessor post_processor_;
  Decoder decoder_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_HF_TOKENIZER_H_

// The tokenizer the router serves a model with: the model's Hugging Face
// `tokenizer.json` (tok::HfTokenizer), or Lockstep's byte-level tokenizer
// (tok::ByteTokenizer) for models that have none. Text in (Encode), text out (Decode,
// and one TextStream per generated sequence, which never splits a character), and the
// display form of single tokens for logprobs.
//
// Generated text skips special tokens (an EOS such as "<|eot_id|>" is not text);
// Decode shows them unless asked not to.
//
// tokenizer_config.json's clean_up_tokenization_spaces (Llama 3 sets it) applies only
// to Detokenize, which promises transformers' tokenizer.decode. Generated text, echo
// and logprobs never clean up, as OpenAI-compatible servers (vLLM, TGI) serve text:
// the clean-up is lossy (`x = ' '` becomes `x =''`, "a ." becomes "a."), so applying
// it would corrupt generated code and make the text differ from what the tokens say.
//
// It also says how a chat answer is parsed (tool calls, reasoning): the family its chat
// template writes, or the one configured (model.tool_call_parser / reasoning_parser).
//
// Immutable after construction; thread-safe. A TextStream belongs to one sequence and
// must not outlive its tokenizer.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TEXT_SERVING_TOKENIZER_H_
#define LOCKSTEP_RUNTIME_ROUTER_TEXT_SERVING_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "runtime/router/tool_calls/parser_family.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::router {

class ServingTokenizer {
 public:
  explicit ServingTokenizer(tok::ByteTokenizer byte);
  // `chat` (may be null): the model's chat template; `clean_up_tokenization_spaces`:
  // that setting (both from tokenizer_config.json).
  explicit ServingTokenizer(std::shared_ptr<const tok::HfTokenizer> hf,
                            std::shared_ptr<const tok::ChatTemplate> chat = nullptr,
                            bool clean_up_tokenization_spaces = false);

  // Incremental detokenization of one generated sequence (special tokens skipped).
  class TextStream {
   public:
    // The text the new `ids` complete (valid UTF-8; maybe empty).
    std::string Push(absl::Span<const int32_t> ids);
    // Ends the stream: an unfinished character becomes U+FFFD.
    std::string Flush();

   private:
    friend class ServingTokenizer;
    explicit TextStream(const ServingTokenizer* owner);

    const ServingTokenizer* owner_;
    std::optional<tok::DecodeStream> hf_;
    tok::Utf8StreamDecoder utf8_;
  };

  TextStream NewTextStream() const { return TextStream(this); }

  // The ids of `text`. With `add_special_tokens`, the tokenizer's post-processor adds
  // its special tokens (e.g. BOS) — the byte-level tokenizer adds none.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = false) const;
  // The text of `ids`; ids outside the vocabulary are skipped.
  std::string Decode(absl::Span<const int32_t> ids, bool skip_special_tokens = false) const;
  // The text of `ids` as transformers' tokenizer.decode(ids) gives it: special tokens
  // shown, an invalid run of byte-fallback tokens one U+FFFD per byte
  // (tokenizer/rust_decode.h), and cleaned up when the model's config says
  // clean_up_tokenization_spaces.
  std::string Detokenize(absl::Span<const int32_t> ids) const;

  // How a single token is shown in logprobs: its text, or for a byte token that is not
  // a whole character "bytes:\xNN" (the OpenAI convention); special tokens by name.
  std::string TokenName(int32_t id) const;
  // The bytes of a single token's text (logprobs "bytes", "text_offset").
  std::string TokenBytes(int32_t id) const;

  int32_t vocab_size() const;
  bool is_hf() const { return hf_ != nullptr; }
  const tok::HfTokenizer* hf() const { return hf_.get(); }
  // The model's chat template, or null (then chat prompts use chat_template.h's).
  const tok::ChatTemplate* chat_template() const { return chat_.get(); }
  // The output parsers of chat answers: the chat template's family (none without a
  // template) unless WithParserFamily chose another.
  const tool_calls::ParserFamily& parser_family() const { return parser_family_; }
  // A copy that parses chat answers as `family`.
  std::shared_ptr<const ServingTokenizer> WithParserFamily(tool_calls::ParserFamily family) const;

 private:
  std::optional<tok::ByteTokenizer> byte_;
  std::shared_ptr<const tok::HfTokenizer> hf_;
  std::shared_ptr<const tok::ChatTemplate> chat_;
  bool clean_up_tokenization_spaces_ = false;
  tool_calls::ParserFamily parser_family_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_TEXT_SERVING_TOKENIZER_H_

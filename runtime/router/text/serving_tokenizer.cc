#include "runtime/router/text/serving_tokenizer.h"

#include <utility>

#include "fmt/format.h"
#include "tokenizer/clean_up_spaces.h"
#include "tokenizer/rust_decode.h"

namespace lockstep::router {

ServingTokenizer::ServingTokenizer(tok::ByteTokenizer byte) : byte_(std::move(byte)) {}

ServingTokenizer::ServingTokenizer(std::shared_ptr<const tok::HfTokenizer> hf,
                                   std::shared_ptr<const tok::ChatTemplate> chat,
                                   bool clean_up_tokenization_spaces)
    : hf_(std::move(hf)),
      chat_(std::move(chat)),
      clean_up_tokenization_spaces_(clean_up_tokenization_spaces),
      parser_family_(chat_ != nullptr ? tool_calls::DetectParserFamily(chat_->source())
                                      : tool_calls::ParserFamily{}) {}

std::shared_ptr<const ServingTokenizer> ServingTokenizer::WithParserFamily(
    tool_calls::ParserFamily family) const {
  auto copy = std::make_shared<ServingTokenizer>(*this);
  copy->parser_family_ = family;
  return copy;
}

ServingTokenizer::TextStream::TextStream(const ServingTokenizer* owner) : owner_(owner) {
  if (owner_->hf_ != nullptr)
    hf_.emplace(owner_->hf_->NewDecodeStream(/*skip_special_tokens=*/true));
}

std::string ServingTokenizer::TextStream::Push(absl::Span<const int32_t> ids) {
  if (!hf_.has_value()) return utf8_.Push(owner_->byte_->TokenBytes(ids));
  std::string text;
  for (int32_t id : ids) text += hf_->Push(id);
  return text;
}

std::string ServingTokenizer::TextStream::Flush() {
  return hf_.has_value() ? hf_->Flush() : utf8_.Flush();
}

std::vector<int32_t> ServingTokenizer::Encode(std::string_view text,
                                              bool add_special_tokens) const {
  return hf_ != nullptr ? hf_->Encode(text, add_special_tokens) : byte_->Encode(text);
}

std::string ServingTokenizer::Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const {
  return hf_ != nullptr ? hf_->Decode(ids, skip_special_tokens) : byte_->Decode(ids);
}

std::string ServingTokenizer::Detokenize(absl::Span<const int32_t> ids) const {
  std::string text = hf_ != nullptr ? tok::RustDecode(*hf_, ids) : Decode(ids);
  return clean_up_tokenization_spaces_ ? tok::CleanUpTokenizationSpaces(text) : text;
}

std::string ServingTokenizer::TokenName(int32_t id) const {
  if (hf_ != nullptr) {
    if (hf_->IsSpecial(id)) {
      const std::string* token = hf_->IdToToken(id);
      return token != nullptr ? *token : fmt::format("<|{}|>", id);
    }
    const std::string text = hf_->Decode({id});
    const std::string bytes = TokenBytes(id);
    // A piece of a character: name its bytes, as for the byte-level tokenizer.
    if (text.find(tok::kReplacementChar) == std::string::npos || bytes == text) return text;
    std::string name = "bytes:";
    for (unsigned char c : bytes) name += fmt::format("\\x{:02x}", c);
    return name;
  }
  if (tok::ByteTokenizer::IsByteToken(id)) {
    if (id < 0x80) return std::string(1, static_cast<char>(id));
    return fmt::format("bytes:\\x{:02x}", id);
  }
  if (id == byte_->bos_token_id()) return "<|bos|>";
  if (id == byte_->eos_token_id()) return "<|eos|>";
  return fmt::format("<|{}|>", id);
}

std::string ServingTokenizer::TokenBytes(int32_t id) const {
  if (hf_ == nullptr) return byte_->TokenBytes({id});
  if (hf_->IsSpecial(id)) return "";
  const std::string* token = hf_->IdToToken(id);
  if (token == nullptr) return "";
  std::string bytes;
  hf_->decoder().AppendTokenBytes(*token, /*index=*/1, &bytes);
  return bytes;
}

int32_t ServingTokenizer::vocab_size() const {
  return hf_ != nullptr ? hf_->vocab_size() : byte_->vocab_size();
}

}  // namespace lockstep::router

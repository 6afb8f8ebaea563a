#include "tokenizer/decode_stream.h"

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {

std::string DecodeStream::Push(int32_t id) {
  const std::string* token = tokenizer_->IdToToken(id);
  if (token == nullptr || (skip_special_tokens_ && tokenizer_->IsSpecial(id))) return "";
  bytes_.clear();
  tokenizer_->decoder().AppendTokenBytes(*token, index_++, &bytes_);
  return Strip(utf8_.Push(bytes_));
}

std::string DecodeStream::Flush() { return Strip(utf8_.Flush()); }

std::string DecodeStream::Strip(std::string text) {
  if (strip_done_) return text;
  const Decoder& decoder = tokenizer_->decoder();
  size_t cut = 0;
  while (cut < text.size()) {
    if (stripped_ == decoder.strip_count()) break;
    size_t next = cut;
    if (NextCodePoint(text, &next) != decoder.strip_char()) break;
    cut = next;
    ++stripped_;
  }
  if (cut < text.size() || stripped_ == decoder.strip_count()) strip_done_ = true;
  return text.erase(0, cut);
}

}  // namespace lockstep::tok

#include "tokenizer/testing_stream.h"

#include "absl/strings/str_cat.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::tok::testing {

std::string CheckStream(const HfTokenizer& tokenizer, const std::vector<int32_t>& ids,
                        const std::string& full_text, bool exhaustive, bool skip_special_tokens) {
  DecodeStream stream = tokenizer.NewDecodeStream(skip_special_tokens);
  std::string text;
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string piece = stream.Push(ids[k]);
    if (!IsValidUtf8(piece)) return absl::StrCat("token ", k, ": the piece is not valid UTF-8");
    text += piece;
    if (full_text.compare(0, text.size(), text) != 0) {
      return absl::StrCat("after token ", k, ": \"", text, "\" is not a prefix of \"", full_text,
                          "\"");
    }
    if (!exhaustive) continue;
    const std::string prefix =
        tokenizer.Decode(absl::MakeConstSpan(ids.data(), k + 1), skip_special_tokens);
    if (text != prefix && text + std::string(kReplacementChar) != prefix) {
      return absl::StrCat("after token ", k, ": streamed \"", text, "\" but Decode gives \"",
                          prefix, "\"");
    }
  }
  text += stream.Flush();
  if (text != full_text) {
    return absl::StrCat("streamed \"", text, "\" but Decode gives \"", full_text, "\"");
  }
  return "";
}

}  // namespace lockstep::tok::testing

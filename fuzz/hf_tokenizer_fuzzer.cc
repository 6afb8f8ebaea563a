// The Hugging Face tokenizer (tokenizer/hf_tokenizer.h) on fuzzed tokenizer.json files
// and text. The input is a tokenizer.json, a NUL byte, and text (any bytes). Loading
// returns a tokenizer or an error with a message; with a tokenizer:
//  * Encode gives ids in [0, vocab_size), with and without special tokens;
//  * Decode of those ids, and of ids taken from the text's bytes (unknown and special
//    ones among them), is valid UTF-8, with and without skipping special tokens;
//  * a DecodeStream fed the same ids gives Decode's text (decode_stream.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using lockstep::tok::HfTokenizer;

// Longer inputs only slow the search down.
constexpr size_t kMaxInput = 256 << 10;
constexpr size_t kMaxText = 4096;

void CheckDecode(const HfTokenizer& tokenizer, const std::vector<int32_t>& ids) {
  for (const bool skip : {false, true}) {
    const std::string whole = tokenizer.Decode(ids, skip);
    if (!lockstep::tok::IsValidUtf8(whole)) std::abort();
    lockstep::tok::DecodeStream stream = tokenizer.NewDecodeStream(skip);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = stream.Push(id);
      if (!lockstep::tok::IsValidUtf8(piece)) std::abort();
      streamed += piece;
    }
    streamed += stream.Flush();
    if (streamed != whole) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInput) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return 0;
  const std::string_view text = input.substr(nul + 1, kMaxText);
  absl::StatusOr<std::unique_ptr<HfTokenizer>> loaded =
      HfTokenizer::FromJson(input.substr(0, nul), "fuzz");
  if (!loaded.ok()) {
    if (loaded.status().message().empty()) std::abort();  // errors say what is wrong
    return 0;
  }
  const HfTokenizer& tokenizer = **loaded;
  const int32_t vocab = tokenizer.vocab_size();
  for (const bool special : {false, true}) {
    const std::vector<int32_t> ids = tokenizer.Encode(text, special);
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab) std::abort();
    }
    CheckDecode(tokenizer, ids);
  }
  // Ids straight from the text: two bytes each, in [-4, vocab + 4).
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const int32_t bits = static_cast<uint8_t>(text[i]) << 8 | static_cast<uint8_t>(text[i + 1]);
    raw.push_back(bits % (vocab + 8) - 4);
  }
  CheckDecode(tokenizer, raw);
  return 0;
}

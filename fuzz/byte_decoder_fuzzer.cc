// The byte tokenizer's decoders on arbitrary ids: Decode never crashes and returns valid
// UTF-8, and streaming the same ids through a Utf8StreamDecoder in arbitrary pieces
// gives the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/utf8_stream_decoder.h"

namespace {

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* tokenizer =
      new lockstep::tok::ByteTokenizer(*lockstep::tok::ByteTokenizer::Create(300, 256, 257));
  // Two bytes per id: ids in [-8, 312), so special and out-of-range ids occur; the low
  // bit of the first byte also marks where a streaming piece ends.
  std::vector<int32_t> ids;
  std::vector<bool> cut;
  for (size_t i = 0; i + 1 < size; i += 2) {
    ids.push_back(static_cast<int32_t>((data[i] << 8 | data[i + 1]) % 320) - 8);
    cut.push_back(data[i] & 1);
  }
  const std::string whole = tokenizer->Decode(ids);
  if (!ValidUtf8(whole)) std::abort();
  lockstep::tok::Utf8StreamDecoder stream;
  std::string streamed;
  std::vector<int32_t> piece;
  for (size_t i = 0; i < ids.size(); ++i) {
    piece.push_back(ids[i]);
    if (cut[i]) {
      streamed += stream.Push(tokenizer->TokenBytes(piece));
      piece.clear();
    }
  }
  streamed += stream.Push(tokenizer->TokenBytes(piece));
  streamed += stream.Flush();
  if (streamed != whole) std::abort();
  return 0;
}

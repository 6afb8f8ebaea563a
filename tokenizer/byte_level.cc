#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char;
  std::array<int16_t, 0x144> char_to_byte;  // every code point of the alphabet is < U+0144
};

const Tables& GetTables() {
  static const Tables tables = [] {
    Tables t;
    t.char_to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      t.byte_to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      t.char_to_byte[t.byte_to_char[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

}  // namespace

char32_t ByteLevelChar(uint8_t byte) { return GetTables().byte_to_char[byte]; }

int ByteLevelByte(char32_t cp) {
  return cp < GetTables().char_to_byte.size() ? GetTables().char_to_byte[cp] : -1;
}

void AppendByteLevel(std::string_view bytes, std::string* out) {
  for (const char c : bytes) AppendUtf8(ByteLevelChar(static_cast<uint8_t>(c)), out);
}

bool AppendByteLevelBytes(std::string_view token, std::string* out) {
  const size_t old_size = out->size();
  for (size_t i = 0; i < token.size();) {
    const int byte = ByteLevelByte(NextCodePoint(token, &i));
    if (byte < 0) {
      out->resize(old_size);
      return false;
    }
    out->push_back(static_cast<char>(byte));
  }
  return true;
}

}  // namespace lockstep::tok

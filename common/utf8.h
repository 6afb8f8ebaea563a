// UTF-8 encoding of one code point, shared by the tokenizers and the grammar engine.
// Header-only; thread-compatible.
#ifndef LOCKSTEP_COMMON_UTF8_H_
#define LOCKSTEP_COMMON_UTF8_H_

#include <string>

namespace lockstep {

// Appends the UTF-8 encoding of `cp` (at most 0x10FFFF; surrogates are encoded as is).
inline void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_UTF8_H_

// Unicode properties the Hugging Face tokenizer pipeline needs: general categories
// (for \p{L}, \p{N}, ... in split patterns), White_Space (for \s), and UTF-8 helpers.
// Tables come from unicode_data.cc; all functions are thread-safe.
//
//   if (IsIn(CategoryOf(cp), kLetterMask)) ...
#ifndef LOCKSTEP_TOKENIZER_UNICODE_H_
#define LOCKSTEP_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace lockstep::tok {

// The 30 general categories, in the generator's order.
enum class GeneralCategory : uint8_t {
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
  kCn,
};

// A set of categories, one bit per GeneralCategory.
using CategoryMask = uint32_t;

constexpr CategoryMask Bit(GeneralCategory c) { return CategoryMask{1} << static_cast<int>(c); }
constexpr CategoryMask kLetterMask = 0x1F;             // Lu Ll Lt Lm Lo
constexpr CategoryMask kMarkMask = 0x7 << 5;           // Mn Mc Me
constexpr CategoryMask kNumberMask = 0x7 << 8;         // Nd Nl No
constexpr CategoryMask kPunctuationMask = 0x7F << 11;  // Pc Pd Ps Pe Pi Pf Po
constexpr CategoryMask kSymbolMask = 0xF << 18;        // Sm Sc Sk So
constexpr CategoryMask kSeparatorMask = 0x7 << 22;     // Zs Zl Zp
constexpr CategoryMask kOtherMask = 0x1F << 25;        // Cc Cf Cs Co Cn

// Parses a property name as written in \p{...}: a category ("Lu"), a major class
// ("L") or a long name ("Letter", "Number", ...). Returns 0 for unknown names.
CategoryMask CategoryMaskByName(std::string_view name);

GeneralCategory CategoryOf(char32_t cp);

inline bool IsIn(char32_t cp, CategoryMask mask) { return (Bit(CategoryOf(cp)) & mask) != 0; }

// Unicode White_Space, which is also Oniguruma's \s (and Hugging Face's): U+0009..U+000D,
// U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool IsWhiteSpace(char32_t cp);

// The code point that starts at `s[*pos]` in valid UTF-8; advances `*pos` past it.
inline char32_t NextCodePoint(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<uint8_t>(s[*pos]);
  if (b0 < 0x80) {
    ++*pos;
    return b0;
  }
  const auto at = [&](size_t k) { return static_cast<char32_t>(s[*pos + k]) & 0x3F; };
  char32_t cp;
  if (b0 < 0xE0) {
    cp = (char32_t{b0} & 0x1F) << 6 | at(1);
    *pos += 2;
  } else if (b0 < 0xF0) {
    cp = (char32_t{b0} & 0x0F) << 12 | at(1) << 6 | at(2);
    *pos += 3;
  } else {
    cp = (char32_t{b0} & 0x07) << 18 | at(1) << 12 | at(2) << 6 | at(3);
    *pos += 4;
  }
  return cp;
}

// The number of code points in valid UTF-8 `s` (its bytes that are not continuation
// bytes).
inline size_t CodePointCount(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// Length of the UTF-8 sequence that a valid lead byte starts.
inline size_t Utf8Length(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

bool IsValidUtf8(std::string_view s);

// `s` with every maximal invalid subsequence replaced by U+FFFD (as TextDecoder and
// Rust's from_utf8_lossy do).
std::string ToValidUtf8(std::string_view s);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_UNICODE_H_

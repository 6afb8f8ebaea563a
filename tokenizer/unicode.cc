#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <memory>

#include "tokenizer/unicode_data.h"
#include "tokenizer/utf8_stream_decoder.h"

namespace lockstep::tok {
namespace {

using unicode_data::kCategoryRuns;
using unicode_data::kCategoryRunsSize;

GeneralCategory SearchRuns(char32_t cp) {
  const uint32_t key = (static_cast<uint32_t>(cp) << 5) | 0x1F;
  const uint32_t* end = kCategoryRuns + kCategoryRunsSize;
  const uint32_t* run = std::upper_bound(kCategoryRuns, end, key) - 1;
  return static_cast<GeneralCategory>(*run & 0x1F);
}

// The Basic Multilingual Plane as a flat table; other planes search the runs.
const std::array<GeneralCategory, 0x10000>& BmpTable() {
  static const auto* table = [] {
    auto* t = new std::array<GeneralCategory, 0x10000>;
    for (size_t i = 0; i < kCategoryRunsSize; ++i) {
      const uint32_t first = kCategoryRuns[i] >> 5;
      if (first >= 0x10000) break;
      const uint32_t last = i + 1 < kCategoryRunsSize
                                ? std::min<uint32_t>(kCategoryRuns[i + 1] >> 5, 0x10000)
                                : 0x10000;
      std::fill(t->begin() + first, t->begin() + last,
                static_cast<GeneralCategory>(kCategoryRuns[i] & 0x1F));
    }
    return t;
  }();
  return *table;
}

}  // namespace

CategoryMask CategoryMaskByName(std::string_view name) {
  static constexpr std::string_view kShort[] = {
      "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
      "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
  for (size_t i = 0; i < std::size(kShort); ++i) {
    if (name == kShort[i]) return CategoryMask{1} << i;
  }
  struct Major {
    std::string_view short_name, long_name;
    CategoryMask mask;
  };
  static constexpr Major kMajor[] = {
      {"L", "Letter", kLetterMask}, {"M", "Mark", kMarkMask},
      {"N", "Number", kNumberMask}, {"P", "Punctuation", kPunctuationMask},
      {"S", "Symbol", kSymbolMask}, {"Z", "Separator", kSeparatorMask},
      {"C", "Other", kOtherMask},
  };
  for (const Major& m : kMajor) {
    if (name == m.short_name || name == m.long_name) return m.mask;
  }
  return 0;
}

GeneralCategory CategoryOf(char32_t cp) {
  if (cp < 0x10000) return BmpTable()[cp];
  if (cp > 0x10FFFF) return GeneralCategory::kCn;
  return SearchRuns(cp);
}

bool IsWhiteSpace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    const auto b1 = static_cast<uint8_t>(s[i + 1]);
    if (b1 < lo || b1 > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  Utf8StreamDecoder decoder;
  std::string out = decoder.Push(s);
  out += decoder.Flush();
  return out;
}

}  // namespace lockstep::tok

#include "tokenizer/normalizer_text.h"

namespace lockstep::tok {
namespace {

// Calls `keep(cp)` for each code point of `text`; appends those it returns true for
// (copying their bytes) to the result.
template <typename Keep>
std::string Filter(std::string_view text, Keep keep) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = NextCodePoint(text, &pos);
    if (keep(cp)) out.append(text, start, pos - start);
  }
  return out;
}

}  // namespace

std::string BertCleanText(std::string_view text) {
  constexpr CategoryMask kControl = Bit(GeneralCategory::kCc) | Bit(GeneralCategory::kCf) |
                                    Bit(GeneralCategory::kCo) | Bit(GeneralCategory::kCn);
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = NextCodePoint(text, &pos);
    const bool tab_or_newline = cp == '\t' || cp == '\n' || cp == '\r';
    if (cp == 0 || cp == 0xFFFD || (!tab_or_newline && IsIn(cp, kControl))) continue;
    if (tab_or_newline || IsWhiteSpace(cp)) {
      out.push_back(' ');
    } else {
      out.append(text, start, pos - start);
    }
  }
  return out;
}

bool IsChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::string SpaceChineseChars(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = NextCodePoint(text, &pos);
    const bool chinese = IsChineseChar(cp);
    if (chinese) out.push_back(' ');
    out.append(text, start, pos - start);
    if (chinese) out.push_back(' ');
  }
  return out;
}

std::string RemoveCategories(std::string_view text, CategoryMask categories) {
  return Filter(text, [&](char32_t cp) { return cp < 0x80 || !IsIn(cp, categories); });
}

std::string NmtNormalize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = NextCodePoint(text, &pos);
    if ((cp >= 0x1 && cp <= 0x8) || cp == 0xB || (cp >= 0xE && cp <= 0x1F) || cp == 0x7F ||
        cp == 0x8F || cp == 0x9F) {
      continue;
    }
    if (cp == '\t' || cp == '\n' || cp == 0xC || cp == '\r' || cp == 0x1680 ||
        (cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0x2581 ||
        cp == 0xFEFF || cp == 0xFFFD) {
      out.push_back(' ');
    } else {
      out.append(text, start, pos - start);
    }
  }
  return out;
}

}  // namespace lockstep::tok

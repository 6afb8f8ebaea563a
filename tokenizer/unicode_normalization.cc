#include "tokenizer/unicode_normalization.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>

#include <cstdlib>

#include "common/utf8.h"
#include "tokenizer/nfc.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

const icu::Normalizer2& Instance(NormalForm form) {
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::kNfc:
      normalizer = icu::Normalizer2::getNFCInstance(error);
      break;
    case NormalForm::kNfd:
      normalizer = icu::Normalizer2::getNFDInstance(error);
      break;
    case NormalForm::kNfkc:
      normalizer = icu::Normalizer2::getNFKCInstance(error);
      break;
    case NormalForm::kNfkd:
      normalizer = icu::Normalizer2::getNFKDInstance(error);
      break;
  }
  // ICU's normalization data is built into libicudata: failing to load it means a broken
  // installation, not bad input.
  if (U_FAILURE(error) || normalizer == nullptr) std::abort();
  return *normalizer;
}

}  // namespace

std::string ToNormalForm(NormalForm form, std::string_view text) {
  if (form == NormalForm::kNfc) return ToNfc(text);
  if (form == NormalForm::kNfd) return ToNfd(text);
  return IcuNormalForm(form, text);
}

std::string IcuNormalForm(NormalForm form, std::string_view text) {
  const icu::Normalizer2& normalizer = Instance(form);
  UErrorCode error = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  normalizer.normalizeUTF8(0, piece, sink, nullptr, error);
  if (U_FAILURE(error)) std::abort();  // only for invalid arguments; `text` is valid UTF-8
  return out;
}

std::string ToLowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (byte < 0x80) {
      out.push_back(byte >= 'A' && byte <= 'Z' ? static_cast<char>(byte + ('a' - 'A'))
                                               : static_cast<char>(byte));
      ++pos;
      continue;
    }
    const char32_t cp = NextCodePoint(text, &pos);
    // The one unconditional lowercase mapping longer than a code point (SpecialCasing.txt):
    // LATIN CAPITAL LETTER I WITH DOT ABOVE.
    if (cp == 0x130) {
      AppendUtf8(U'i', &out);
      AppendUtf8(0x307, &out);
    } else {
      AppendUtf8(static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp))), &out);
    }
  }
  return out;
}

}  // namespace lockstep::tok

// The text edits behind the normalizers of normalizer.h that are not plain Unicode
// normalization (unicode_normalization.h): BertNormalizer's cleaning and spacing of
// Chinese characters, accent stripping and Nmt, each as Hugging Face tokenizers (Rust)
// defines it. Inputs and outputs are valid UTF-8; all functions are thread-safe.
#ifndef LOCKSTEP_TOKENIZER_NORMALIZER_TEXT_H_
#define LOCKSTEP_TOKENIZER_NORMALIZER_TEXT_H_

#include <string>
#include <string_view>

#include "tokenizer/unicode.h"

namespace lockstep::tok {

// BertNormalizer's clean_text: drops U+0000, U+FFFD and "control" code points (general
// category Cc, Cf, Co or Cn, except tab, line feed and carriage return), then turns
// every White_Space code point into ' '.
std::string BertCleanText(std::string_view text);

// BertNormalizer's handle_chinese_chars: ' ' before and after each CJK ideograph (the
// CJK Unified Ideographs blocks and extensions A-F, and the compatibility blocks).
std::string SpaceChineseChars(std::string_view text);
bool IsChineseChar(char32_t cp);

// `text` without the code points whose general category is in `categories`:
// kMarkMask for the StripAccents normalizer, Bit(kMn) for BertNormalizer's strip_accents.
std::string RemoveCategories(std::string_view text, CategoryMask categories);

// The Nmt normalizer (SentencePiece's nmt_nfkc without NFKC): drops ASCII and C1
// control codes U+0001..U+0008, U+000B, U+000E..U+001F, U+007F, U+008F, U+009F, and
// maps tab, line feed, form feed, carriage return, U+1680, U+200B..U+200F, U+2028,
// U+2029, U+2581, U+FEFF and U+FFFD to ' '.
std::string NmtNormalize(std::string_view text);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_NORMALIZER_TEXT_H_

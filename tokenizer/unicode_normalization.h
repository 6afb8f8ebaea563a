// Unicode normalization forms and lowercasing for the tokenizer's normalizers. NFC and
// NFD are Lockstep's own (nfc.h, tables of Unicode 17.0 read off the JavaScript
// reference's ICU); NFKC, NFKD and lowercasing are ICU's (libicu-dev).
//
// Why NFC stays ours (docs/perf.md, "Tokenizer normalization"): Debian 12's ICU is as
// fast on text NFC leaves unchanged and faster on text it changes, but it implements
// Unicode 15.0, and the reference runs Unicode 17.0: with ICU's NFC the byte-exact
// reference test fails (Qwen 3, a random string with a combining mark added by Unicode
// 16.0 or 17.0). The ICU-backed ones keep that caveat: code points assigned since 15.0
// are not decomposed, reordered or lowercased here.
//
// All functions are thread-safe (ICU's normalizer instances are immutable singletons).
#ifndef LOCKSTEP_TOKENIZER_UNICODE_NORMALIZATION_H_
#define LOCKSTEP_TOKENIZER_UNICODE_NORMALIZATION_H_

#include <string>
#include <string_view>

namespace lockstep::tok {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// `text` (valid UTF-8) in `form`.
std::string ToNormalForm(NormalForm form, std::string_view text);

// ICU's implementation of `form`, NFC included (normalization_bench compares the two
// NFCs).
std::string IcuNormalForm(NormalForm form, std::string_view text);

// `text` (valid UTF-8) with each code point replaced by its full lowercase mapping on
// its own, as Rust's char::to_lowercase and so Hugging Face tokenizers' Lowercase: no
// context, so a final capital sigma becomes U+03C3, not U+03C2.
std::string ToLowercase(std::string_view text);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_UNICODE_NORMALIZATION_H_

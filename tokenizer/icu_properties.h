// Unicode properties read from ICU (libicu-dev) that the tables of unicode.h lack: the
// Alphabetic property (for Rust's \w) and scripts (for the UnicodeScripts
// pre-tokenizer). ICU's Unicode version (15.0 on Debian 12) applies; see
// unicode_normalization.h. Thread-safe.
#ifndef LOCKSTEP_TOKENIZER_ICU_PROPERTIES_H_
#define LOCKSTEP_TOKENIZER_ICU_PROPERTIES_H_

namespace lockstep::tok {

// Whether ICU's Unicode version assigns `cp` (tests skip code points that only newer
// versions assign).
bool IsAssignedInIcu(char32_t cp);

// Unicode Alphabetic.
bool IsAlphabetic(char32_t cp);

// The Unicode Script property value of `cp` (an ICU UScriptCode: Common, Inherited and
// Unknown are values of their own).
int ScriptOf(char32_t cp);

// The UScriptCode values the UnicodeScripts pre-tokenizer treats specially.
inline constexpr int kScriptHan = 17, kScriptHiragana = 20, kScriptKatakana = 22;

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_ICU_PROPERTIES_H_

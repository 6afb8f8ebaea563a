#include "tokenizer/icu_properties.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>

namespace lockstep::tok {

static_assert(kScriptHan == USCRIPT_HAN && kScriptHiragana == USCRIPT_HIRAGANA &&
              kScriptKatakana == USCRIPT_KATAKANA);

bool IsAssignedInIcu(char32_t cp) { return u_charType(static_cast<UChar32>(cp)) != U_UNASSIGNED; }

bool IsAlphabetic(char32_t cp) {
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_ALPHABETIC);
}

int ScriptOf(char32_t cp) {
  UErrorCode error = U_ZERO_ERROR;
  const UScriptCode script = uscript_getScript(static_cast<UChar32>(cp), &error);
  return U_SUCCESS(error) ? static_cast<int>(script) : static_cast<int>(USCRIPT_UNKNOWN);
}

}  // namespace lockstep::tok

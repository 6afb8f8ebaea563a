// Unicode Normalization Forms C (canonical decomposition, canonical ordering, canonical
// composition) and D (without the composition), for the "NFC" and "NFD" normalizers of
// Hugging Face tokenizers (Qwen's uses NFC). Runs of text that NFC cannot change are copied as they
// are, so ASCII, CJK and already-composed text cost one table lookup per character.
#ifndef LOCKSTEP_TOKENIZER_NFC_H_
#define LOCKSTEP_TOKENIZER_NFC_H_

#include <string>
#include <string_view>

namespace lockstep::tok {

// `text` (valid UTF-8) in NFC.
std::string ToNfc(std::string_view text);

// `text` (valid UTF-8) in NFD (canonical decomposition and ordering, no composition).
std::string ToNfd(std::string_view text);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_NFC_H_

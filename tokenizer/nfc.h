// Unicode Normalization Form C (canonical decomposition, canonical ordering, canonical
// composition), for the "NFC" normalizer of Hugging Face tokenizers (Qwen's, among
// others). Runs of text that NFC cannot change are copied as they are, so ASCII, CJK
// and already-composed text cost one table lookup per character.
#ifndef LOCKSTEP_TOKENIZER_NFC_H_
#define LOCKSTEP_TOKENIZER_NFC_H_

#include <string>
#include <string_view>

namespace lockstep::tok {

// `text` (valid UTF-8) in NFC.
std::string ToNfc(std::string_view text);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_NFC_H_

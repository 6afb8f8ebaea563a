// The GPT-2 "byte level" alphabet: each of the 256 byte values is shown as one printable
// code point (printable Latin-1 bytes as themselves, the others as U+0100..U+0143), so
// that a byte-level BPE vocabulary is a set of ordinary strings.
#ifndef LOCKSTEP_TOKENIZER_BYTE_LEVEL_H_
#define LOCKSTEP_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep::tok {

char32_t ByteLevelChar(uint8_t byte);

// The byte `cp` stands for, or -1 if it is not in the alphabet.
int ByteLevelByte(char32_t cp);

// Appends the byte-level spelling of `bytes` to `out` ("Ġhi" for " hi").
void AppendByteLevel(std::string_view bytes, std::string* out);

// Appends the bytes that `token` (valid UTF-8) spells in the byte-level alphabet; false
// (and `out` unchanged) if some code point of it is not in the alphabet.
bool AppendByteLevelBytes(std::string_view token, std::string* out);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_BYTE_LEVEL_H_

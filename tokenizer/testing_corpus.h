// A seeded corpus of tricky tokenizer inputs for the reference tests: ASCII prose, code,
// emoji, CJK, combining marks, invalid byte sequences, special-token strings, white
// space runs, numbers, contractions, random code points and 10k-character lines.
//
// The generator never emits U+017F (LATIN SMALL LETTER LONG S): Oniguruma, and so
// Hugging Face's Rust tokenizers and Lockstep, match it case-insensitively with "s" in
// the contraction pattern (?i:'s|...), while the JavaScript reference folds ASCII only.
// tokenizer_reference_test checks Lockstep's behaviour for it by hand instead.
#ifndef LOCKSTEP_TOKENIZER_TESTING_CORPUS_H_
#define LOCKSTEP_TOKENIZER_TESTING_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::tok::testing {

// `count` strings (any bytes); `special_tokens` are mixed into some of them.
std::vector<std::string> GenerateCorpus(uint64_t seed, size_t count,
                                        const std::vector<std::string>& special_tokens);

}  // namespace lockstep::tok::testing

#endif  // LOCKSTEP_TOKENIZER_TESTING_CORPUS_H_

// Test-only: seeded random token id sequences as a model may generate them, for the
// decode tests against the reference: ordinary tokens, lone byte tokens (a byte-fallback
// "<0xHH>" or a byte-level single-byte token), the byte tokens of a whole or cut
// multi-byte character, and special and other added tokens in the middle of text.
//
// No sequence holds the byte tokens EF BB BF in a row (special tokens between them
// aside): the JavaScript reference's ByteFallback drops a byte-order mark that starts a
// run of byte tokens (tokenizer_reference_test shows what Lockstep does instead).
#ifndef LOCKSTEP_TOKENIZER_TESTING_IDS_H_
#define LOCKSTEP_TOKENIZER_TESTING_IDS_H_

#include <cstdint>
#include <vector>

#include "tokenizer/hf_tokenizer.h"

namespace lockstep::tok::testing {

// `count` sequences of 1 to 48 ids, each id one that `tokenizer` has.
std::vector<std::vector<int32_t>> GenerateIdSequences(uint64_t seed, const HfTokenizer& tokenizer,
                                                      size_t count);

}  // namespace lockstep::tok::testing

#endif  // LOCKSTEP_TOKENIZER_TESTING_IDS_H_

// Test-only check of DecodeStream against HfTokenizer::Decode.
#ifndef LOCKSTEP_TOKENIZER_TESTING_STREAM_H_
#define LOCKSTEP_TOKENIZER_TESTING_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/hf_tokenizer.h"

namespace lockstep::tok::testing {

// Streams `ids` one token at a time and checks, after every token, that the text so far
// is valid UTF-8 and a prefix of `full_text` (= Decode(ids, skip_special_tokens)), and
// at the end that it is all of it. With `exhaustive`, also that after token k it is
// Decode(ids[0, k], skip_special_tokens) exactly, or that minus a final U+FFFD standing
// for a character the next tokens may finish. Returns "" or what went wrong.
std::string CheckStream(const HfTokenizer& tokenizer, const std::vector<int32_t>& ids,
                        const std::string& full_text, bool exhaustive,
                        bool skip_special_tokens = false);

}  // namespace lockstep::tok::testing

#endif  // LOCKSTEP_TOKENIZER_TESTING_STREAM_H_

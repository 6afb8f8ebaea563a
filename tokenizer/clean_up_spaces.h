// transformers' clean_up_tokenization: the decoded text with the space before
// punctuation and English contractions removed (" ." -> ".", " n't" -> "n't", " ' " ->
// "'", ...), applied by PreTrainedTokenizer.decode when the model's
// tokenizer_config.json sets `clean_up_tokenization_spaces` (Llama 3 does). Not part of
// tokenizer.json, so HfTokenizer::Decode never applies it; callers that promise
// transformers' decode do.
//
// The replacements run one after another over the whole text, as Python's str.replace
// chain does, so the result equals transformers' byte for byte (and the JavaScript
// reference's). It is lossy: `x = ' '` becomes `x =''`.
#ifndef LOCKSTEP_TOKENIZER_CLEAN_UP_SPACES_H_
#define LOCKSTEP_TOKENIZER_CLEAN_UP_SPACES_H_

#include <string>
#include <string_view>

namespace lockstep::tok {

std::string CleanUpTokenizationSpaces(std::string_view text);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_CLEAN_UP_SPACES_H_

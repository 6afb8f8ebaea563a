// A small Hugging Face tokenizer.json for tests: byte-level BPE whose ids 0..255 are
// the bytes, 256 is the merge "he", 300 "<|end|>" and 301 "<s>" are special tokens.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TESTING_TEST_TOKENIZER_H_
#define LOCKSTEP_RUNTIME_ROUTER_TESTING_TEST_TOKENIZER_H_

#include "nlohmann/json.hpp"

namespace lockstep::router::testing {

nlohmann::json TokenizerJson();

}  // namespace lockstep::router::testing

#endif  // LOCKSTEP_RUNTIME_ROUTER_TESTING_TEST_TOKENIZER_H_

// File: testing_vocabulary.h
//
// Test-only: a seeded byte-level BPE-like vocabulary (all 256 single bytes, JSON
// fragments, words with and without a leading space, numbers, whitespace runs, and
// random mixes of them), ending with a non-text special token and the stop token.
#ifndef LOCKSTEP_GRAMMAR_TESTING_VOCABULARY_H_
#define LOCKSTEP_GRAMMAR_TESTING_VOCABULARY_H_

#include <cstdint>
#include <memory>

#include "grammar/matcher.h"

namespace lockstep::grammar {

// `size` >= 300 tokens; the last id is the stop token, the one before it a special token
// with empty bytes.
std::shared_ptr<const Vocabulary> MakeTestingVocabulary(int32_t size, uint32_t seed);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_TESTING_VOCABULARY_H_

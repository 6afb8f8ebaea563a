// File: model_vocabulary.h
//
// The grammar Vocabulary (matcher.h) of a model directory, for the engine that masks
// logits on the rank owning a request: each token id's bytes from the directory's
// tokenizer, `tokenizer.json` (Hugging Face BPE, byte-level or byte fallback; special
// tokens are not text) or else `lockstep_tokenizer.json` (ids 0..255 are the bytes),
// padded with non-text ids up to the model's vocabulary size (a model's embedding may
// be larger than its tokenizer), the model's EOS as the stop token.
//
// Thread safety: pure functions.
#ifndef LOCKSTEP_GRAMMAR_MODEL_VOCABULARY_H_
#define LOCKSTEP_GRAMMAR_MODEL_VOCABULARY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grammar/matcher.h"

namespace lockstep::grammar {

// `vocab_size`: the model's (config.json); a tokenizer with more ids is an error naming
// both sizes. `eos_token_id` < 0: no stop token.
absl::StatusOr<std::shared_ptr<const Vocabulary>> LoadModelVocabulary(const std::string& model_dir,
                                                                      int32_t vocab_size,
                                                                      int32_t eos_token_id);

}  // namespace lockstep::grammar

#endif  // LOCKSTEP_GRAMMAR_MODEL_VOCABULARY_H_

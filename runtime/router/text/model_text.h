// What the router takes from a model directory to turn text into tokens and back:
//
//   tokenizer.json          the Hugging Face tokenizer (else lockstep_tokenizer.json, the
//                           byte-level tokenizer of Lockstep's own models)
//   tokenizer_config.json   bos_token / eos_token (a string or {"content": ...}), the
//                           chat_template (a string, or a list of {"name", "template"}
//                           of which "default" is used) and clean_up_tokenization_spaces
//                           (a boolean, false when absent as in transformers; see
//                           ServingTokenizer::Detokenize)
//   generation_config.json  eos_token_id (an id or a list): every id that ends
//                           generation, as the model's authors configured it; and
//                           temperature, top_p, top_k, repetition_penalty: the
//                           defaults of requests that omit them (sampling_defaults.h)
//
//   ASSIGN_OR_RETURN(ModelText text, LoadModelText(dir));
//
// Errors name the file and the field. Value type; the tokenizer is shared and immutable.
#ifndef LOCKSTEP_RUNTIME_ROUTER_TEXT_MODEL_TEXT_H_
#define LOCKSTEP_RUNTIME_ROUTER_TEXT_MODEL_TEXT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/router/text/sampling_defaults.h"
#include "runtime/router/text/serving_tokenizer.h"

namespace lockstep::router {

struct ModelText {
  std::shared_ptr<const ServingTokenizer> tokenizer;
  std::string bos_token;  // "" when none
  std::string eos_token;
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> eos_token_id;
  // Ids that end generation besides the engine's EOS (generation_config.json, else the
  // eos_token), each in the vocabulary.
  std::vector<int32_t> eos_token_ids;
  // "" when the model has none; else it is parsed at load (a template the Jinja
  // interpreter cannot render fails LoadModelText) and the tokenizer carries it.
  std::string chat_template;
  // generation_config.json's sampling, each field in the range requests accept.
  SamplingDefaults sampling_defaults;
};

// Loads the files above from `dir`; a directory without tokenizer.json has the
// byte-level tokenizer (lockstep_tokenizer.json), no chat template, and of
// generation_config.json only the sampling defaults.
absl::StatusOr<ModelText> LoadModelText(const std::string& dir);

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_TEXT_MODEL_TEXT_H_

// The "post_processor" of a tokenizer.json, for one sequence: TemplateProcessing (its
// "single" template, e.g. BOS + the text) and ByteLevel (no change to ids), alone or in
// a Sequence. Others fail FromJson, naming the type.
#ifndef LOCKSTEP_TOKENIZER_POST_PROCESSOR_H_
#define LOCKSTEP_TOKENIZER_POST_PROCESSOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok {

class PostProcessor {
 public:
  // `config` may be null.
  static absl::StatusOr<PostProcessor> FromJson(const nlohmann::json& config);

  // Adds the template's special tokens around `ids`.
  void AddSpecialTokens(std::vector<int32_t>* ids) const;

  // InvalidArgument when a template's special token id is outside [0, vocab_size): the
  // tokenizer would hand the engine an id it has no embedding for.
  absl::Status CheckIds(int32_t vocab_size) const;

 private:
  absl::Status AddConfig(const nlohmann::json& config);

  // Each template is the ids before and after the sequence; nested ones apply inside out.
  struct Template {
    std::vector<int32_t> before, after;
  };
  std::vector<Template> templates_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_POST_PROCESSOR_H_

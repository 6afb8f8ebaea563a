// Test-only access to the JavaScript tokenizer reference that
// tokenizer/testdata/setup_reference.sh installs (real tokenizer.json files and
// @huggingface/tokenizers) in tokenizer/testdata/reference/node_modules.
//
// FindReference looks in $LOCKSTEP_TOKENIZER_REFERENCE if set, else in the workspace
// folder that the test's runfile tokenizer/testdata/reference/package.json links to,
// and fails (never skips) when the install is missing.
#ifndef LOCKSTEP_TOKENIZER_TESTING_REFERENCE_H_
#define LOCKSTEP_TOKENIZER_TESTING_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lockstep::tok::testing {

struct ReferenceResult {
  std::vector<int32_t> ids;  // encode without special tokens
  std::string text;          // decode(ids)
  // decode(ids) with the config's clean_up_tokenization_spaces (transformers' decode).
  std::string cleaned;
  bool has_ids_special = false;
  std::vector<int32_t> ids_special;  // encode with special tokens
};

// The reference's decoding of one id sequence.
struct ReferenceDecode {
  std::string skip;         // decode(ids, skip_special_tokens)
  std::string detokenized;  // decode(ids) with the config's clean_up_tokenization_spaces
};

class Reference {
 public:
  // The tokenizer.json of `name` (llama3, qwen3, llama2, gemma3, deepseek_v3).
  std::string TokenizerJson(const std::string& name) const;
  // Its tokenizer_config.json.
  std::string TokenizerConfig(const std::string& name) const;

  // Runs the reference on `corpus` (node js_reference.cjs encode ...), and when
  // `decoded` is given, decodes each of `sequences` into it in the same run.
  absl::StatusOr<std::vector<ReferenceResult>> Encode(
      const std::string& name, const std::vector<std::string>& corpus,
      const std::vector<std::vector<int32_t>>& sequences = {},
      std::vector<ReferenceDecode>* decoded = nullptr) const;

  // Runs one component alone (`node js_reference.cjs component`): `kind` is
  // "normalizer", "pre_tokenizer" or "decoder", `config` its tokenizer.json config. One
  // JSON result per input ({"text"} or {"words"}); a decoder's inputs are JSON arrays of
  // token strings.
  absl::StatusOr<std::vector<nlohmann::json>> RunComponent(
      const std::string& kind, const nlohmann::json& config,
      const std::vector<std::string>& inputs) const;

  // Runs `node js_reference.cjs bench` on a text file; returns MB/s.
  absl::StatusOr<double> BenchEncode(const std::string& name, const std::string& text_path) const;

  std::string dir;     // .../tokenizer/testdata/reference
  std::string script;  // .../tokenizer/testdata/js_reference.cjs
};

absl::StatusOr<Reference> FindReference();

// Renders chat templates with jinja2 as Hugging Face transformers does
// (testdata/chat_template_reference.py, a runfile of this library): `input` is
// {"config": tokenizer_config.json path} or {"template", "special_tokens"}, with
// "cases": [{"messages", "tools", "add_generation_prompt", "extra"}]. One result per
// case: {"text": ...} or {"error": "ExceptionName: message"}. `name` names the
// temporary files.
absl::StatusOr<std::vector<nlohmann::ordered_json>> RenderWithJinja2(
    const std::string& name, const nlohmann::ordered_json& input);

}  // namespace lockstep::tok::testing

#endif  // LOCKSTEP_TOKENIZER_TESTING_REFERENCE_H_

// The "normalizer" of a tokenizer.json: edits applied to each piece of text between
// added tokens before it is split into words. Supported types, as Hugging Face
// tokenizers (Rust) defines them: Sequence, NFC, NFD, NFKC, NFKD, Lowercase,
// StripAccents, BertNormalizer, Nmt, ByteLevel, Prepend, Replace (string or regex
// pattern), Strip. Others (Precompiled, the SentencePiece character map of Unigram
// models, which Lockstep does not load) fail FromJson, naming the type.
//
// Immutable after construction; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_NORMALIZER_H_
#define LOCKSTEP_TOKENIZER_NORMALIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_normalization.h"

namespace lockstep::tok {

class Normalizer {
 public:
  // `config` may be null (no normalization).
  static absl::StatusOr<Normalizer> FromJson(const nlohmann::json& config);

  // `text` (valid UTF-8, non-empty) normalized.
  std::string Normalize(std::string_view text) const;

  // True if Normalize returns its input unchanged.
  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    enum class Kind {
      kUnicode,
      kLowercase,
      kStripAccents,
      kBert,
      kNmt,
      kByteLevel,
      kPrepend,
      kReplace,
      kStrip
    };
    Kind kind;
    NormalForm form = NormalForm::kNfc;  // kUnicode
    std::string text;                    // Prepend: the prefix; Replace: the literal pattern
    std::string content;                 // Replace: the replacement
    std::shared_ptr<const Regex> regex;  // Replace with a regex pattern
    bool strip_left = false, strip_right = false;
    // kBert
    bool clean_text = true, chinese_chars = true, strip_accents = true, lowercase = true;
  };

  static absl::Status AddSteps(const nlohmann::json& config, std::vector<Step>* steps);
  static void Apply(const Step& step, std::string* text);

  std::vector<Step> steps_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_NORMALIZER_H_

// The "pre_tokenizer" of a tokenizer.json: splits each normalized piece of text into
// the words that the model tokenizes one by one. Supported types, as Hugging Face
// tokenizers (Rust) defines them: Sequence, Split (string or regex pattern, every
// behavior, invert), ByteLevel (last in a sequence; its words go to the model as
// bytes), Metaspace, Digits, and the character-class splits of pre_tokenizer_chars.cc:
// Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, CharDelimiterSplit,
// FixedLength, UnicodeScripts. Others fail FromJson.
//
// Immutable after construction; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_PRE_TOKENIZER_H_
#define LOCKSTEP_TOKENIZER_PRE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/regex.h"

namespace lockstep::tok {

// Words as byte ranges [first, second) of `text`.
struct Words {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;

  std::string_view word(size_t i) const {
    return std::string_view(text).substr(ranges[i].first, ranges[i].second - ranges[i].first);
  }
};

// How a Split step treats the pieces its pattern matches (Hugging Face's
// SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // `config` may be null (the whole piece is one word).
  static absl::StatusOr<PreTokenizer> FromJson(const nlohmann::json& config);

  // Splits `piece` (valid UTF-8, non-empty) into `words` (replacing its contents).
  // `at_input_start`: the piece starts the input (Metaspace's prepend_scheme "first").
  void Split(std::string_view piece, bool at_input_start, Words* words) const;

  // Whether the last step is ByteLevel: the model sees words as raw bytes.
  bool byte_level() const { return byte_level_; }

 private:
  struct Step {
    enum class Kind {
      kSplit,
      kByteLevel,
      kMetaspace,
      kDigits,
      kWhitespace,
      kWhitespaceSplit,
      kBert,
      kPunctuation,
      kCharDelimiter,
      kFixedLength,
      kUnicodeScripts
    };
    Kind kind;
    std::shared_ptr<const Regex> regex;  // kSplit with a regex; kByteLevel with use_regex
    std::string literal;                 // kSplit with a string; kMetaspace: the replacement
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;                                              // kByteLevel
    enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;  // kMetaspace
    bool split = true;                                                          // kMetaspace
    bool individual_digits = false;                                             // kDigits
    char32_t delimiter = 0;                                                     // kCharDelimiter
    size_t length = 5;                                                          // kFixedLength
  };

  // Parses the types of pre_tokenizer_chars.cc into `step`; false for other types.
  static absl::StatusOr<bool> ParseCharStep(const std::string& type, const nlohmann::json& config,
                                            Step* step);

  static absl::Status AddSteps(const nlohmann::json& config, std::vector<Step>* steps);
  static absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& name);
  static void ApplySplit(const Step& step, Words* words);
  static void ApplyByteLevel(const Step& step, Words* words);
  static void ApplyMetaspace(const Step& step, bool at_input_start, Words* words);
  static void ApplyDigits(const Step& step, Words* words);
  // The types of pre_tokenizer_chars.cc.
  static void ApplyCharStep(const Step& step, Words* words);
  static void ApplyWhitespace(Words* words);
  static void ApplyFixedLength(const Step& step, Words* words);
  static void ApplyUnicodeScripts(Words* words);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_PRE_TOKENIZER_H_

// A small backtracking regex matcher for the split patterns of Hugging Face tokenizer
// files (GPT-2, Llama 3, Qwen, DeepSeek, ...), with Oniguruma's semantics (which the
// Rust `tokenizers` library uses): leftmost-first alternation, greedy quantifiers,
// \s = Unicode White_Space, \p{..} = general categories.
//
// Supported: literals and escapes (\r \n \t \f \v \xHH \x{H..} \uHHHH, escaped
// punctuation), classes [...] and [^...] with ranges, \s \S \p{X} \P{X} (X a general
// category, a major class or its long name), groups (...) (?:...) and (?i:...) (case
// folding of ASCII letters, plus U+017F for s and U+212A for k), lookaheads (?=...) and
// (?!...), quantifiers ? * + {n} {n,} {n,m}. Anything else — anchors, \d \w \b, '.',
// backreferences, lazy or possessive quantifiers, lookbehind, patterns that can match
// the empty string — fails Compile with an error that names it.
//
//   ASSIGN_OR_RETURN(Regex re, Regex::Compile(R"(\p{N}{1,3})"));
//   re.ForEachMatch(text, [](size_t start, size_t end) { ... });
//
// Text must be valid UTF-8. Immutable after Compile; thread-safe.
#ifndef LOCKSTEP_TOKENIZER_REGEX_H_
#define LOCKSTEP_TOKENIZER_REGEX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace regex_internal {

// A set of code points: explicit ranges, categories and white space, maybe negated.
struct CharSet {
  std::vector<std::pair<char32_t, char32_t>> ranges;
  CategoryMask categories = 0;             // \p{..}
  CategoryMask not_categories = 0;         // \P{..}: code points outside these categories
  bool white_space = false;                // \s
  bool not_white_space = false;            // \S
  bool negated = false;                    // [^...]
  std::array<uint64_t, 2> ascii = {0, 0};  // Contains() for code points < 128

  bool ContainsSlow(char32_t cp) const;
  bool Contains(char32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63) & 1) != 0;
    return ContainsSlow(cp);
  }
};

struct Item {
  enum class Kind : uint8_t { kSet, kGroup, kLookahead, kNegativeLookahead };
  Kind kind = Kind::kSet;
  int index = 0;  // into Program::sets (kSet) or Program::groups (the others)
  int min = 1;
  int max = 1;  // kUnbounded for * + {n,}
};
inline constexpr int kUnbounded = -1;

struct Sequence {
  std::vector<Item> items;
};

struct Alternation {
  std::vector<Sequence> branches;
};

struct Program {
  std::vector<CharSet> sets;
  std::vector<Alternation> groups;  // groups[0] is the whole pattern
};

absl::StatusOr<Program> Parse(std::string_view pattern);

}  // namespace regex_internal

class Regex {
 public:
  static absl::StatusOr<Regex> Compile(std::string_view pattern);

  // The leftmost match at or after `from`, as [*start, *end); false if there is none.
  bool Find(std::string_view text, size_t from, size_t* start, size_t* end) const;

  // Calls `fn(start, end)` for each match, left to right, without overlaps.
  template <typename Fn>
  void ForEachMatch(std::string_view text, Fn&& fn) const {
    size_t pos = 0, start = 0, end = 0;
    while (pos < text.size() && Find(text, pos, &start, &end)) {
      fn(start, end);
      pos = end;
    }
  }

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string pattern, regex_internal::Program program)
      : pattern_(std::move(pattern)), program_(std::move(program)) {}

  std::string pattern_;
  regex_internal::Program program_;
};

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_REGEX_H_

// The pre-tokenizers that split at classes of characters rather than at a pattern:
// Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, CharDelimiterSplit,
// FixedLength and UnicodeScripts, each as Hugging Face tokenizers (Rust) defines it.
#include <cstdint>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/icu_properties.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/split_segments.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// Rust's char::is_ascii_punctuation || unicode_categories' is_punctuation (P*).
bool IsBertPunctuation(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return IsIn(cp, kPunctuationMask);
}

// The Rust regex crate's Unicode \w: Alphabetic, marks, decimal digits, connector
// punctuation and the joiners.
bool IsWordChar(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  constexpr CategoryMask kWord = kLetterMask | kMarkMask | Bit(GeneralCategory::kNd) |
                                 Bit(GeneralCategory::kNl) | Bit(GeneralCategory::kPc);
  return IsIn(cp, kWord) || cp == 0x200C || cp == 0x200D || IsAlphabetic(cp);
}

// Splits every word at each code point `is_match` accepts (each its own match), joining
// the pieces as `behavior` says.
template <typename IsMatch>
void SplitAtChars(Words* words, SplitBehavior behavior, IsMatch is_match) {
  Ranges out, matches;
  std::vector<Segment> segments;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const std::string_view word = words->word(w);
    matches.clear();
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      if (is_match(NextCodePoint(word, &i))) {
        matches.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(i));
      }
    }
    Segments(words->ranges[w].first, words->ranges[w].second, matches, false, &segments);
    Emit(segments, behavior, &out);
  }
  words->ranges = std::move(out);
}

// UnicodeScripts' script of a code point: kana count as Han (as does U+30FC, the
// prolonged sound mark), and ' ' belongs to every script (-1).
int FixedScript(char32_t cp) {
  if (cp == 0x30FC) return kScriptHan;
  if (cp == ' ') return -1;
  const int script = ScriptOf(cp);
  return script == kScriptHiragana || script == kScriptKatakana ? kScriptHan : script;
}

}  // namespace

absl::StatusOr<bool> PreTokenizer::ParseCharStep(const std::string& type,
                                                 const nlohmann::json& config, Step* step) {
  if (type == "Whitespace") {
    step->kind = Step::Kind::kWhitespace;
  } else if (type == "WhitespaceSplit") {
    step->kind = Step::Kind::kWhitespaceSplit;
  } else if (type == "BertPreTokenizer") {
    step->kind = Step::Kind::kBert;
  } else if (type == "UnicodeScripts") {
    step->kind = Step::Kind::kUnicodeScripts;
  } else if (type == "Punctuation") {
    step->kind = Step::Kind::kPunctuation;
    ASSIGN_OR_RETURN(const std::string behavior,
                     StringField(config, "behavior", "pre_tokenizer Punctuation",
                                 /*required=*/false, "Isolated"));
    ASSIGN_OR_RETURN(step->behavior, ParseBehavior(behavior));
  } else if (type == "CharDelimiterSplit") {
    step->kind = Step::Kind::kCharDelimiter;
    ASSIGN_OR_RETURN(const std::string delimiter,
                     StringField(config, "delimiter", "pre_tokenizer CharDelimiterSplit"));
    size_t pos = 0;
    if (delimiter.empty() || !IsValidUtf8(delimiter) ||
        (step->delimiter = NextCodePoint(delimiter, &pos), pos != delimiter.size())) {
      return absl::InvalidArgumentError(
          "pre_tokenizer CharDelimiterSplit: 'delimiter' must be one character");
    }
  } else if (type == "FixedLength") {
    step->kind = Step::Kind::kFixedLength;
    ASSIGN_OR_RETURN(const int64_t length,
                     IntField(config, "length", "pre_tokenizer FixedLength", 5));
    if (length <= 0) {
      return absl::InvalidArgumentError(
          fmt::format("pre_tokenizer FixedLength: 'length' must be positive, not {}", length));
    }
    step->length = static_cast<size_t>(length);
  } else {
    return false;
  }
  return true;
}

void PreTokenizer::ApplyCharStep(const Step& step, Words* words) {
  switch (step.kind) {
    case Step::Kind::kWhitespace:
      ApplyWhitespace(words);
      return;
    case Step::Kind::kWhitespaceSplit:
      SplitAtChars(words, SplitBehavior::kRemoved, IsWhiteSpace);
      return;
    case Step::Kind::kBert:
      SplitAtChars(words, SplitBehavior::kRemoved, IsWhiteSpace);
      SplitAtChars(words, SplitBehavior::kIsolated, IsBertPunctuation);
      return;
    case Step::Kind::kPunctuation:
      SplitAtChars(words, step.behavior, IsBertPunctuation);
      return;
    case Step::Kind::kCharDelimiter:
      SplitAtChars(words, SplitBehavior::kRemoved,
                   [&](char32_t cp) { return cp == step.delimiter; });
      return;
    case Step::Kind::kFixedLength:
      ApplyFixedLength(step, words);
      return;
    case Step::Kind::kUnicodeScripts:
      ApplyUnicodeScripts(words);
      return;
    default:
      return;  // the pattern steps, applied by Split
  }
}

// \w+|[^\w\s]+ kept, the rest (white space) removed: maximal runs of word characters
// and of other non-space characters.
void PreTokenizer::ApplyWhitespace(Words* words) {
  Ranges out;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const std::string_view word = words->word(w);
    const uint32_t base = words->ranges[w].first;
    int run_class = 0;  // 0: space, 1: word, 2: other
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      const char32_t cp = NextCodePoint(word, &i);
      const int cls = IsWordChar(cp) ? 1 : IsWhiteSpace(cp) ? 0 : 2;
      if (cls != 0 && cls == run_class) {
        out.back().second = base + static_cast<uint32_t>(i);
      } else if (cls != 0) {
        out.emplace_back(base + static_cast<uint32_t>(start), base + static_cast<uint32_t>(i));
      }
      run_class = cls;
    }
  }
  words->ranges = std::move(out);
}

void PreTokenizer::ApplyFixedLength(const Step& step, Words* words) {
  Ranges out;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const std::string_view word = words->word(w);
    const uint32_t base = words->ranges[w].first;
    size_t count = 0;
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      NextCodePoint(word, &i);
      if (count++ % step.length == 0) {
        out.emplace_back(base + static_cast<uint32_t>(start), base + static_cast<uint32_t>(i));
      } else {
        out.back().second = base + static_cast<uint32_t>(i);
      }
    }
  }
  words->ranges = std::move(out);
}

// A word starts wherever the script changes, ' ' belonging to every script. As in
// Rust, what precedes the first code point that has a script (leading spaces) is
// dropped.
void PreTokenizer::ApplyUnicodeScripts(Words* words) {
  Ranges out;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const std::string_view word = words->word(w);
    const uint32_t base = words->ranges[w].first;
    const size_t first = out.size();
    int last = -2;  // none yet
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      const int script = FixedScript(NextCodePoint(word, &i));
      if (script != -1 && last != -1 && last != script) {
        out.emplace_back(base + static_cast<uint32_t>(start), base + static_cast<uint32_t>(i));
      } else if (out.size() > first) {
        out.back().second = base + static_cast<uint32_t>(i);
      }
      if (script != -1) last = script;
    }
  }
  words->ranges = std::move(out);
}

}  // namespace lockstep::tok

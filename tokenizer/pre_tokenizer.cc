#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/split_segments.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

constexpr std::string_view kWhat = "pre_tokenizer";

// The split pattern of the ByteLevel pre-tokenizer when `use_regex` is set (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromJson(const nlohmann::json& config) {
  PreTokenizer pre;
  if (config.is_null()) return pre;
  RETURN_IF_ERROR(AddSteps(config, &pre.steps_));
  for (size_t i = 0; i < pre.steps_.size(); ++i) {
    if (pre.steps_[i].kind == Step::Kind::kByteLevel && i + 1 != pre.steps_.size()) {
      return absl::UnimplementedError(
          "pre_tokenizer: a step after ByteLevel is not supported (ByteLevel must be last)");
    }
  }
  pre.byte_level_ = !pre.steps_.empty() && pre.steps_.back().kind == Step::Kind::kByteLevel;
  return pre;
}

absl::StatusOr<SplitBehavior> PreTokenizer::ParseBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return absl::InvalidArgumentError(
      fmt::format("pre_tokenizer Split: unknown behavior '{}'", name));
}

absl::Status PreTokenizer::AddSteps(const nlohmann::json& config, std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, TypeOf(config, kWhat));
  if (type == "Sequence") {
    const auto it = config.find("pretokenizers");
    if (it == config.end() || !it->is_array()) {
      return absl::InvalidArgumentError("pre_tokenizer Sequence: 'pretokenizers' must be an array");
    }
    for (const nlohmann::json& child : *it) RETURN_IF_ERROR(AddSteps(child, steps));
    return absl::OkStatus();
  }
  Step step;
  if (type == "Split") {
    step.kind = Step::Kind::kSplit;
    ASSIGN_OR_RETURN(const PatternField pattern, PatternOf(config, "pre_tokenizer Split"));
    if (pattern.is_regex) {
      ASSIGN_OR_RETURN(Regex regex, Regex::Compile(pattern.text));
      step.regex = std::make_shared<const Regex>(std::move(regex));
    } else if (pattern.text.empty()) {
      return absl::InvalidArgumentError("pre_tokenizer Split: empty pattern");
    } else {
      step.literal = pattern.text;
    }
    ASSIGN_OR_RETURN(const std::string behavior,
                     StringField(config, "behavior", "pre_tokenizer Split"));
    ASSIGN_OR_RETURN(step.behavior, ParseBehavior(behavior));
    ASSIGN_OR_RETURN(step.invert, BoolField(config, "invert", "pre_tokenizer Split", false));
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
    ASSIGN_OR_RETURN(step.add_prefix_space,
                     BoolField(config, "add_prefix_space", "pre_tokenizer ByteLevel", true));
    ASSIGN_OR_RETURN(const bool use_regex,
                     BoolField(config, "use_regex", "pre_tokenizer ByteLevel", true));
    if (use_regex) {
      ASSIGN_OR_RETURN(Regex regex, Regex::Compile(kGpt2Pattern));
      step.regex = std::make_shared<const Regex>(std::move(regex));
    }
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::kMetaspace;
    ASSIGN_OR_RETURN(step.literal, StringField(config, "replacement", "pre_tokenizer Metaspace",
                                               /*required=*/false, "\u2581"));
    ASSIGN_OR_RETURN(step.split, BoolField(config, "split", "pre_tokenizer Metaspace", true));
    ASSIGN_OR_RETURN(const bool add_prefix_space,
                     BoolField(config, "add_prefix_space", "pre_tokenizer Metaspace", true));
    ASSIGN_OR_RETURN(const std::string scheme,
                     StringField(config, "prepend_scheme", "pre_tokenizer Metaspace",
                                 /*required=*/false, add_prefix_space ? "always" : "never"));
    if (scheme == "always") {
      step.prepend = Step::Prepend::kAlways;
    } else if (scheme == "first") {
      step.prepend = Step::Prepend::kFirst;
    } else if (scheme == "never") {
      step.prepend = Step::Prepend::kNever;
    } else {
      return absl::InvalidArgumentError(
          fmt::format("pre_tokenizer Metaspace: unknown prepend_scheme '{}'", scheme));
    }
    if (step.literal.empty()) {
      return absl::InvalidArgumentError("pre_tokenizer Metaspace: empty replacement");
    }
  } else if (type == "Digits") {
    step.kind = Step::Kind::kDigits;
    ASSIGN_OR_RETURN(step.individual_digits,
                     BoolField(config, "individual_digits", "pre_tokenizer Digits", false));
  } else {
    ASSIGN_OR_RETURN(const bool parsed, ParseCharStep(type, config, &step));
    if (!parsed) return UnsupportedType(kWhat, type);
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

void PreTokenizer::Split(std::string_view piece, bool at_input_start, Words* words) const {
  words->text.assign(piece);
  words->ranges.assign(1, {0, static_cast<uint32_t>(piece.size())});
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kSplit:
        ApplySplit(step, words);
        break;
      case Step::Kind::kByteLevel:
        ApplyByteLevel(step, words);
        break;
      case Step::Kind::kMetaspace:
        ApplyMetaspace(step, at_input_start, words);
        break;
      case Step::Kind::kDigits:
        ApplyDigits(step, words);
        break;
      default:
        ApplyCharStep(step, words);
        break;
    }
  }
}

void PreTokenizer::ApplySplit(const Step& step, Words* words) {
  std::vector<std::pair<uint32_t, uint32_t>> out, matches;
  std::vector<Segment> segments;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const auto [start, end] = words->ranges[w];
    const std::string_view word = words->word(w);
    matches.clear();
    if (step.regex != nullptr) {
      step.regex->ForEachMatch(word, [&](size_t s, size_t e) {
        matches.emplace_back(static_cast<uint32_t>(s), static_cast<uint32_t>(e));
      });
    } else {
      for (size_t at = word.find(step.literal); at != std::string_view::npos;
           at = word.find(step.literal, at + step.literal.size())) {
        matches.emplace_back(static_cast<uint32_t>(at),
                             static_cast<uint32_t>(at + step.literal.size()));
      }
    }
    Segments(start, end, matches, step.invert, &segments);
    Emit(segments, step.behavior, &out);
  }
  words->ranges = std::move(out);
}

void PreTokenizer::ApplyByteLevel(const Step& step, Words* words) {
  if (step.add_prefix_space) {
    Words spaced;
    for (size_t w = 0; w < words->ranges.size(); ++w) {
      const uint32_t start = static_cast<uint32_t>(spaced.text.size());
      if (words->word(w)[0] != ' ') spaced.text.push_back(' ');
      spaced.text.append(words->word(w));
      spaced.ranges.emplace_back(start, static_cast<uint32_t>(spaced.text.size()));
    }
    *words = std::move(spaced);
  }
  if (step.regex != nullptr) {
    Step split;
    split.kind = Step::Kind::kSplit;
    split.regex = step.regex;
    ApplySplit(split, words);
  }
}

void PreTokenizer::ApplyMetaspace(const Step& step, bool at_input_start, Words* words) {
  Words out;
  std::vector<Segment> segments;
  std::vector<std::pair<uint32_t, uint32_t>> matches;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const std::string_view word = words->word(w);
    const uint32_t start = static_cast<uint32_t>(out.text.size());
    const bool first = at_input_start && words->ranges[w].first == 0;
    const bool starts_with_replacement =
        word.substr(0, step.literal.size()) == step.literal || (word[0] == ' ');
    if (!starts_with_replacement && (step.prepend == Step::Prepend::kAlways ||
                                     (step.prepend == Step::Prepend::kFirst && first))) {
      out.text.append(step.literal);
    }
    for (const char c : word) {
      if (c == ' ') {
        out.text.append(step.literal);
      } else {
        out.text.push_back(c);
      }
    }
    const uint32_t end = static_cast<uint32_t>(out.text.size());
    if (!step.split) {
      out.ranges.emplace_back(start, end);
      continue;
    }
    const std::string_view text = std::string_view(out.text).substr(start, end - start);
    matches.clear();
    for (size_t at = text.find(step.literal); at != std::string_view::npos;
         at = text.find(step.literal, at + step.literal.size())) {
      matches.emplace_back(static_cast<uint32_t>(at),
                           static_cast<uint32_t>(at + step.literal.size()));
    }
    Segments(start, end, matches, /*invert=*/false, &segments);
    Emit(segments, SplitBehavior::kMergedWithNext, &out.ranges);
  }
  *words = std::move(out);
}

void PreTokenizer::ApplyDigits(const Step& step, Words* words) {
  std::vector<std::pair<uint32_t, uint32_t>> out, matches;
  std::vector<Segment> segments;
  for (size_t w = 0; w < words->ranges.size(); ++w) {
    const std::string_view word = words->word(w);
    matches.clear();
    for (size_t i = 0; i < word.size();) {
      const size_t start = i;
      if (IsIn(NextCodePoint(word, &i), kNumberMask)) {
        matches.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(i));
      }
    }
    Segments(words->ranges[w].first, words->ranges[w].second, matches, false, &segments);
    Emit(segments, step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
         &out);
  }
  words->ranges = std::move(out);
}

}  // namespace lockstep::tok

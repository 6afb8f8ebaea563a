#include "tokenizer/normalizer.h"

#include "common/status_macros.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/nfc.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

constexpr std::string_view kWhat = "normalizer";

// Byte length of the leading (or trailing) White_Space code points of `s`.
size_t LeadingSpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t next = i;
    if (!IsWhiteSpace(NextCodePoint(s, &next))) break;
    i = next;
  }
  return i;
}

size_t TrailingSpace(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t next = start;
    if (!IsWhiteSpace(NextCodePoint(s, &next))) break;
    end = start;
  }
  return s.size() - end;
}

}  // namespace

absl::StatusOr<Normalizer> Normalizer::FromJson(const nlohmann::json& config) {
  Normalizer normalizer;
  if (!config.is_null()) RETURN_IF_ERROR(AddSteps(config, &normalizer.steps_));
  return normalizer;
}

absl::Status Normalizer::AddSteps(const nlohmann::json& config, std::vector<Step>* steps) {
  ASSIGN_OR_RETURN(const std::string type, TypeOf(config, kWhat));
  if (type == "Sequence") {
    const auto it = config.find("normalizers");
    if (it == config.end() || !it->is_array()) {
      return absl::InvalidArgumentError("normalizer Sequence: 'normalizers' must be an array");
    }
    for (const nlohmann::json& child : *it) RETURN_IF_ERROR(AddSteps(child, steps));
    return absl::OkStatus();
  }
  Step step;
  if (type == "NFC") {
    step.kind = Step::Kind::kNfc;
  } else if (type == "Prepend") {
    step.kind = Step::Kind::kPrepend;
    ASSIGN_OR_RETURN(step.text, StringField(config, "prepend", "normalizer Prepend"));
  } else if (type == "Replace") {
    step.kind = Step::Kind::kReplace;
    ASSIGN_OR_RETURN(const PatternField pattern, PatternOf(config, "normalizer Replace"));
    ASSIGN_OR_RETURN(step.content, StringField(config, "content", "normalizer Replace"));
    if (pattern.is_regex) {
      ASSIGN_OR_RETURN(Regex regex, Regex::Compile(pattern.text));
      step.regex = std::make_shared<const Regex>(std::move(regex));
    } else if (pattern.text.empty()) {
      return absl::InvalidArgumentError("normalizer Replace: empty pattern");
    } else {
      step.text = pattern.text;
    }
  } else if (type == "Strip") {
    step.kind = Step::Kind::kStrip;
    ASSIGN_OR_RETURN(step.strip_left, BoolField(config, "strip_left", "normalizer Strip", true));
    ASSIGN_OR_RETURN(step.strip_right, BoolField(config, "strip_right", "normalizer Strip", true));
  } else {
    return UnsupportedType(kWhat, type);
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

std::string Normalizer::Normalize(std::string_view text) const {
  std::string out(text);
  for (const Step& step : steps_) {
    if (out.empty()) break;
    Apply(step, &out);
  }
  return out;
}

void Normalizer::Apply(const Step& step, std::string* text) {
  switch (step.kind) {
    case Step::Kind::kNfc:
      *text = ToNfc(*text);
      return;
    case Step::Kind::kPrepend:
      text->insert(0, step.text);
      return;
    case Step::Kind::kStrip: {
      if (step.strip_right) text->resize(text->size() - TrailingSpace(*text));
      if (step.strip_left) text->erase(0, LeadingSpace(*text));
      return;
    }
    case Step::Kind::kReplace: {
      std::string out;
      size_t copied = 0;
      const auto replace = [&](size_t start, size_t end) {
        out.append(*text, copied, start - copied);
        out.append(step.content);
        copied = end;
      };
      if (step.regex != nullptr) {
        step.regex->ForEachMatch(*text, replace);
      } else {
        for (size_t at = text->find(step.text); at != std::string::npos;
             at = text->find(step.text, copied)) {
          replace(at, at + step.text.size());
        }
      }
      if (copied == 0 && out.empty()) return;
      out.append(*text, copied);
      *text = std::move(out);
      return;
    }
  }
}

}  // namespace lockstep::tok

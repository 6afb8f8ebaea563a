#include "tokenizer/normalizer.h"

#include "common/status_macros.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer_text.h"
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
  static constexpr std::pair<std::string_view, NormalForm> kForms[] = {
      {"NFC", NormalForm::kNfc},
      {"NFD", NormalForm::kNfd},
      {"NFKC", NormalForm::kNfkc},
      {"NFKD", NormalForm::kNfkd},
  };
  for (const auto& [name, form] : kForms) {
    if (type == name) {
      step.kind = Step::Kind::kUnicode;
      step.form = form;
      steps->push_back(std::move(step));
      return absl::OkStatus();
    }
  }
  if (type == "Lowercase") {
    step.kind = Step::Kind::kLowercase;
  } else if (type == "StripAccents") {
    step.kind = Step::Kind::kStripAccents;
  } else if (type == "Nmt") {
    step.kind = Step::Kind::kNmt;
  } else if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
  } else if (type == "BertNormalizer") {
    step.kind = Step::Kind::kBert;
    constexpr std::string_view kBert = "normalizer BertNormalizer";
    ASSIGN_OR_RETURN(step.clean_text, BoolField(config, "clean_text", kBert, true));
    ASSIGN_OR_RETURN(step.chinese_chars, BoolField(config, "handle_chinese_chars", kBert, true));
    ASSIGN_OR_RETURN(step.lowercase, BoolField(config, "lowercase", kBert, true));
    // strip_accents null (or absent) follows lowercase, as in the original BERT.
    ASSIGN_OR_RETURN(step.strip_accents, BoolField(config, "strip_accents", kBert, step.lowercase));
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
    case Step::Kind::kUnicode:
      *text = ToNormalForm(step.form, *text);
      return;
    case Step::Kind::kLowercase:
      *text = ToLowercase(*text);
      return;
    case Step::Kind::kStripAccents:
      *text = RemoveCategories(*text, kMarkMask);
      return;
    case Step::Kind::kNmt:
      *text = NmtNormalize(*text);
      return;
    case Step::Kind::kByteLevel: {
      std::string out;
      AppendByteLevel(*text, &out);
      *text = std::move(out);
      return;
    }
    case Step::Kind::kBert:
      // In Hugging Face's order: clean, space CJK, strip accents (after NFD), lowercase.
      if (step.clean_text) *text = BertCleanText(*text);
      if (step.chinese_chars) *text = SpaceChineseChars(*text);
      if (step.strip_accents) {
        *text = RemoveCategories(ToNormalForm(NormalForm::kNfd, *text), Bit(GeneralCategory::kMn));
      }
      if (step.lowercase) *text = ToLowercase(*text);
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

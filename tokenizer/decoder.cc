#include "tokenizer/decoder.h"

#include "common/status_macros.h"
#include "fmt/format.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<char32_t> SingleChar(const std::string& s, std::string_view what) {
  size_t pos = 0;
  if (s.empty() || !IsValidUtf8(s)) {
    return absl::InvalidArgumentError(fmt::format("{}: needs one character", what));
  }
  const char32_t cp = NextCodePoint(s, &pos);
  if (pos != s.size())
    return absl::InvalidArgumentError(fmt::format("{}: needs one character", what));
  return cp;
}

// `text` with every `from` replaced by `to`.
void ReplaceAll(std::string_view from, std::string_view to, std::string* text) {
  std::string out;
  size_t copied = 0;
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, copied)) {
    out.append(*text, copied, at - copied);
    out.append(to);
    copied = at + from.size();
  }
  if (copied == 0) return;
  out.append(*text, copied);
  *text = std::move(out);
}

// The WordPiece decoder's clean-up of one token, in Hugging Face's order.
void WordPieceCleanup(std::string* token) {
  static constexpr std::pair<std::string_view, std::string_view> kEdits[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  for (const auto& [from, to] : kEdits) ReplaceAll(from, to, token);
}

}  // namespace

int FallbackByte(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  const int hi = HexDigit(token[3]), lo = HexDigit(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

absl::StatusOr<Decoder> Decoder::FromJson(const nlohmann::json& config) {
  Decoder decoder;
  if (config.is_null()) {
    decoder.join_with_spaces_ = true;
    return decoder;
  }
  RETURN_IF_ERROR(decoder.Add(config));
  return decoder;
}

absl::Status Decoder::Add(const nlohmann::json& config) {
  ASSIGN_OR_RETURN(const std::string type, TypeOf(config, "decoder"));
  const bool after_bytes = byte_stage_ != ByteStage::kNone;
  const auto order_error = [&type]() {
    return absl::UnimplementedError(fmt::format(
        "decoder {} after a ByteLevel, ByteFallback or Fuse decoder is not supported", type));
  };
  if (type == "Sequence") {
    const auto it = config.find("decoders");
    if (it == config.end() || !it->is_array()) {
      return absl::InvalidArgumentError("decoder Sequence: 'decoders' must be an array");
    }
    for (const nlohmann::json& child : *it) RETURN_IF_ERROR(Add(child));
    return absl::OkStatus();
  }
  if (type == "Fuse") {
    fused_ = true;
    return absl::OkStatus();
  }
  if (type == "ByteLevel" || type == "ByteFallback") {
    if (after_bytes || fused_) return order_error();
    byte_stage_ = type == "ByteLevel" ? ByteStage::kByteLevel : ByteStage::kByteFallback;
    if (byte_stage_ == ByteStage::kByteLevel) fused_ = true;  // it returns one string
    return absl::OkStatus();
  }
  Step step;
  if (type == "Strip") {
    ASSIGN_OR_RETURN(const std::string content, StringField(config, "content", "decoder Strip"));
    ASSIGN_OR_RETURN(step.strip_char, SingleChar(content, "decoder Strip 'content'"));
    ASSIGN_OR_RETURN(const int64_t start, IntField(config, "start", "decoder Strip", 0));
    ASSIGN_OR_RETURN(const int64_t stop, IntField(config, "stop", "decoder Strip", 0));
    if (start < 0 || stop < 0) return absl::InvalidArgumentError("decoder Strip: negative count");
    if (fused_) {
      if (stop != 0 || strip_count_ != 0) {
        return absl::UnimplementedError(
            "decoder Strip of the whole text is supported only once and with stop 0");
      }
      strip_count_ = static_cast<size_t>(start);
      strip_char_ = step.strip_char;
      return absl::OkStatus();
    }
    if (after_bytes) return order_error();
    step.kind = Step::Kind::kStrip;
    step.start = static_cast<size_t>(start);
    step.stop = static_cast<size_t>(stop);
  } else if (type == "Replace") {
    if (after_bytes || fused_) return order_error();
    ASSIGN_OR_RETURN(const PatternField pattern, PatternOf(config, "decoder Replace"));
    if (pattern.is_regex || pattern.text.empty()) {
      return absl::UnimplementedError(
          "decoder Replace: only a non-empty string pattern is supported");
    }
    step.kind = Step::Kind::kReplace;
    step.from = pattern.text;
    ASSIGN_OR_RETURN(step.to, StringField(config, "content", "decoder Replace"));
  } else if (type == "Metaspace") {
    if (after_bytes || fused_) return order_error();
    step.kind = Step::Kind::kMetaspace;
    ASSIGN_OR_RETURN(step.from,
                     StringField(config, "replacement", "decoder Metaspace", false, "\u2581"));
    RETURN_IF_ERROR(SingleChar(step.from, "decoder Metaspace 'replacement'").status());
    ASSIGN_OR_RETURN(const bool add_prefix_space,
                     BoolField(config, "add_prefix_space", "decoder Metaspace", true));
    ASSIGN_OR_RETURN(const std::string scheme,
                     StringField(config, "prepend_scheme", "decoder Metaspace", false,
                                 add_prefix_space ? "always" : "never"));
    step.prepend = scheme != "never";
  } else if (type == "WordPiece") {
    if (after_bytes || fused_) return order_error();
    step.kind = Step::Kind::kWordPiece;
    ASSIGN_OR_RETURN(step.from, StringField(config, "prefix", "decoder WordPiece", false, "##"));
    ASSIGN_OR_RETURN(step.cleanup, BoolField(config, "cleanup", "decoder WordPiece", true));
  } else {
    return UnsupportedType("decoder", type);
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

void Decoder::ApplyStep(const Step& step, size_t index, std::string* token) {
  switch (step.kind) {
    case Step::Kind::kReplace:
      ReplaceAll(step.from, step.to, token);
      return;
    case Step::Kind::kWordPiece:
      if (index != 0) {
        if (!step.from.empty() && token->starts_with(step.from)) {
          token->erase(0, step.from.size());
        } else {
          token->insert(0, 1, ' ');
        }
      }
      if (step.cleanup) WordPieceCleanup(token);
      return;
    case Step::Kind::kStrip: {
      std::vector<std::pair<size_t, char32_t>> cps;  // (byte offset, code point)
      for (size_t i = 0; i < token->size();) {
        const size_t start = i;
        cps.emplace_back(start, NextCodePoint(*token, &i));
      }
      size_t first = 0, last = cps.size();
      while (first < step.start && first < cps.size() && cps[first].second == step.strip_char) {
        ++first;
      }
      for (size_t i = 0; i < step.stop && last > first && cps[last - 1].second == step.strip_char;
           ++i) {
        --last;
      }
      const size_t begin = first < cps.size() ? cps[first].first : token->size();
      const size_t end = last < cps.size() ? cps[last].first : token->size();
      *token = token->substr(begin, std::max(begin, end) - begin);
      return;
    }
    case Step::Kind::kMetaspace: {
      std::string out;
      for (size_t at = 0; at < token->size();) {
        const size_t next = token->find(step.from, at);
        out.append(*token, at, (next == std::string::npos ? token->size() : next) - at);
        if (next == std::string::npos) break;
        if (!(index == 0 && step.prepend)) out.push_back(' ');
        at = next + step.from.size();
      }
      *token = std::move(out);
      return;
    }
  }
}

void Decoder::AppendTokenBytes(std::string_view token, size_t index, std::string* out) const {
  std::string edited;
  if (!steps_.empty()) {
    edited.assign(token);
    for (const Step& step : steps_) ApplyStep(step, index, &edited);
    token = edited;
  }
  switch (byte_stage_) {
    case ByteStage::kByteLevel:
      if (!AppendByteLevelBytes(token, out)) out->append(token);
      return;
    case ByteStage::kByteFallback:
      if (const int byte = FallbackByte(token); byte >= 0) {
        out->push_back(static_cast<char>(byte));
      } else {
        out->append(token);
      }
      return;
    case ByteStage::kNone:
      if (join_with_spaces_ && index > 0) out->push_back(' ');
      out->append(token);
      return;
  }
}

}  // namespace lockstep::tok

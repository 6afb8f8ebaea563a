#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <array>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/pyops.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok::jinja {
namespace {

constexpr std::array<absl::string_view, 26> kOperators = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};

// Python's str.isspace for the character at `pos` (0 when not whitespace), its length
// in bytes otherwise.
size_t SpaceAt(absl::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  size_t next = pos;
  return IsPySpace(NextCodePoint(StdView(s), &next)) ? next - pos : 0;
}

size_t SkipSpaces(absl::string_view s, size_t pos) {
  while (const size_t n = SpaceAt(s, pos)) pos += n;
  return pos;
}

// str.rstrip() (Python whitespace).
absl::string_view RStrip(absl::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    if (SpaceAt(s, start) == 0) break;
    end = start;
  }
  return s.substr(0, end);
}

bool AllSpaces(absl::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = SpaceAt(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }

// Python's unicode-escape decoding of a string literal's body.
absl::StatusOr<std::string> DecodeEscapes(absl::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char e = body[++i];
    const auto hex = [&](size_t digits) -> absl::StatusOr<char32_t> {
      char32_t cp = 0;
      for (size_t k = 1; k <= digits; ++k) {
        const char h = i + k < body.size() ? body[i + k] : 'g';
        if (!absl::ascii_isxdigit(h)) {
          return absl::InvalidArgumentError("truncated \\x, \\u or \\U escape in a string");
        }
        cp = cp * 16 + static_cast<char32_t>(IsDigit(h) ? h - '0' : absl::ascii_tolower(h) - 'a' + 10);
      }
      i += digits;
      return cp;
    };
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x':
      case 'u':
      case 'U': {
        const absl::StatusOr<char32_t> cp = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
        if (!cp.ok()) return cp.status();
        if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp < 0xE000)) {
          return absl::InvalidArgumentError("unsupported escape: a surrogate or out-of-range code point");
        }
        AppendUtf8(*cp, &out);
        break;
      }
      case 'N': return absl::InvalidArgumentError("unsupported escape \\N{...} in a string");
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            cp = cp * 8 + static_cast<char32_t>(body[++i] - '0');
          }
          AppendUtf8(cp, &out);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = absl::string_view::npos;
      for (const absl::string_view tag : {"{{", "{%", "{#"}) start = std::min(start, src_.find(std::string(tag), pos_));
      if (start == absl::string_view::npos) {
        Emit(Token::Type::kData, src_.substr(pos_));
        break;
      }
      const char kind = src_[start + 1];
      size_t p = start + 2;
      const char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      absl::string_view text = absl::string_view(src_).substr(pos_, start - pos_);
      text = Control(text, sign, kind != '{', line_starting);
      Emit(Token::Type::kData, std::string(text));
      Advance(start);
      if (kind == '#') {
        if (absl::Status s = Comment(p); !s.ok()) return s;
      } else if (kind == '%' && RawBegin(p)) {
        if (absl::Status s = Raw(); !s.ok()) return s;
      } else {
        Emit(kind == '%' ? Token::Type::kBlockBegin : Token::Type::kVariableBegin, "");
        Advance(p);
        if (absl::Status s = Tag(kind == '%'); !s.ok()) return s;
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back(Token{Token::Type::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  // Whitespace control of the text before a tag: `-` strips all trailing whitespace;
  // lstrip_blocks strips spaces between the line start and a block or comment tag.
  static absl::string_view Control(absl::string_view text, char sign, bool lstrip,
                                  bool line_starting) {
    if (sign == '-') return RStrip(text);
    if (sign == '+' || !lstrip) return text;
    const size_t newline = text.rfind('\n');
    const size_t l_pos = newline == absl::string_view::npos ? 0 : newline + 1;
    if ((l_pos > 0 || line_starting) && l_pos < text.size() && AllSpaces(text.substr(l_pos))) {
      return text.substr(0, l_pos);
    }
    return text;
  }

  void Emit(Token::Type type, std::string text) {
    if (type == Token::Type::kData && text.empty()) return;
    tokens_.push_back(Token{type, std::move(text), line_});
  }

  void Advance(size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<ptrdiff_t>(pos_),
                                         src_.begin() + static_cast<ptrdiff_t>(to), '\n'));
    pos_ = to;
  }

  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_, ": ", message));
  }

  // After `{%-` / `-%}` style end markers: `+E` keeps, `-E` strips following whitespace,
  // a plain block or comment end drops one newline (trim_blocks).
  size_t EndAfter(size_t at, char modifier, size_t marker_length, bool trim) const {
    size_t end = at + marker_length;
    if (modifier == '-') return SkipSpaces(src_, end);
    if (modifier == 0 && trim && end < src_.size() && src_[end] == '\n') ++end;
    return end;
  }

  absl::Status Comment(size_t p) {
    const size_t close = src_.find("#}", p);
    if (close == std::string::npos) return Error("missing end of comment tag ('#}')");
    const char modifier = close > p && (src_[close - 1] == '-' || src_[close - 1] == '+')
                              ? src_[close - 1]
                              : 0;
    Advance(EndAfter(close, modifier, 2, true));
    return absl::OkStatus();
  }

  // `raw` followed by the end of the tag, at `p` (after `{%` and its sign).
  bool RawBegin(size_t p) {
    p = SkipSpaces(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpaces(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      raw_body_ = SkipSpaces(src_, p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      raw_body_ = p + 2;
      return true;
    }
    return false;
  }

  absl::Status Raw() {
    Advance(raw_body_);
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 1)) {
      size_t p = at + 2;
      const char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      p = SkipSpaces(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = SkipSpaces(src_, p + 6);
      const char modifier = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (src_.compare(p + (modifier ? 1 : 0), 2, "%}") != 0) continue;
      const absl::string_view text = absl::string_view(src_).substr(pos_, at - pos_);
      Emit(Token::Type::kData, std::string(Control(text, sign, true, false)));
      Advance(EndAfter(p + (modifier ? 1 : 0), modifier, 2, true));
      return absl::OkStatus();
    }
    return Error("missing end of raw directive ({% endraw %})");
  }

  // The tokens of one `{{ ... }}` or `{% ... %}`, up to and including its end.
  absl::Status Tag(bool block) {
    const absl::string_view close = block ? "%}" : "}}";
    std::string brackets;
    while (true) {
      if (pos_ >= src_.size()) {
        return Error(absl::StrCat("unexpected end of template (missing '", close, "')"));
      }
      if (brackets.empty()) {
        const char modifier = src_[pos_] == '-' || (block && src_[pos_] == '+') ? src_[pos_] : 0;
        const size_t at = pos_ + (modifier ? 1 : 0);
        if (absl::string_view(src_).substr(at, 2) == close) {
          Emit(block ? Token::Type::kBlockEnd : Token::Type::kVariableEnd, "");
          Advance(EndAfter(at, modifier, 2, block));
          return absl::OkStatus();
        }
      }
      if (const size_t skip = SkipSpaces(src_, pos_); skip > pos_) {
        Advance(skip);
        continue;
      }
      const char c = src_[pos_];
      if (IsDigit(c)) {
        Number();
      } else if (IsNameStart(c)) {
        size_t end = pos_;
        while (end < src_.size() && (IsNameStart(src_[end]) || IsDigit(src_[end]))) ++end;
        Emit(Token::Type::kName, src_.substr(pos_, end - pos_));
        Advance(end);
      } else if (c == '\'' || c == '"') {
        if (absl::Status s = String(c); !s.ok()) return s;
      } else {
        const auto op = std::find_if(kOperators.begin(), kOperators.end(), [&](absl::string_view o) {
          return absl::string_view(src_).substr(pos_, o.size()) == o;
        });
        if (op == kOperators.end()) return Error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
        if (*op == "(" || *op == "[" || *op == "{") {
          brackets.push_back((*op)[0]);
        } else if (*op == ")" || *op == "]" || *op == "}") {
          const char open = *op == ")" ? '(' : *op == "]" ? '[' : '{';
          if (brackets.empty() || brackets.back() != open) return Error(absl::StrCat("unexpected '", *op, "'"));
          brackets.pop_back();
        }
        Emit(Token::Type::kOperator, std::string(*op));
        Advance(pos_ + op->size());
      }
    }
  }

  // Digits with optional underscores at `end`.
  size_t Digits(size_t end) const {
    while (end < src_.size() && (IsDigit(src_[end]) || (src_[end] == '_' && end + 1 < src_.size() &&
                                                        IsDigit(src_[end + 1])))) {
      ++end;
    }
    return end;
  }

  void Number() {
    size_t end = Digits(pos_);
    bool is_float = false;
    const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && IsDigit(src_[end + 1])) {
      end = Digits(end + 1);
      is_float = true;
    }
    if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t exp = end + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && IsDigit(src_[exp])) {
        end = Digits(exp);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Emit(is_float ? Token::Type::kFloat : Token::Type::kInteger, std::move(text));
    Advance(end);
  }

  absl::Status String(char quote) {
    size_t end = pos_ + 1;
    while (end < src_.size() && src_[end] != quote) end += src_[end] == '\\' ? 2 : 1;
    if (end >= src_.size()) return Error("unterminated string literal");
    absl::StatusOr<std::string> value = DecodeEscapes(absl::string_view(src_).substr(pos_ + 1, end - pos_ - 1));
    if (!value.ok()) return Error(value.status().message());
    Emit(Token::Type::kString, std::move(*value));
    Advance(end + 1);
    return absl::OkStatus();
  }

  const std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  size_t raw_body_ = 0;
  std::vector<Token> tokens_;
};

// Newlines as "\n"; one trailing newline dropped (keep_trailing_newline=False).
std::string Normalize(absl::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(absl::string_view source) {
  if (!IsValidUtf8(StdView(source))) return absl::InvalidArgumentError("the template is not valid UTF-8");
  return Lexer(Normalize(source)).Run();
}

}  // namespace lockstep::tok::jinja

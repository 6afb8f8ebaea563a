#include "grammar/ebnf.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/utf8_ranges.h"

namespace lockstep::grammar {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view text) : t_(text) {}

  absl::StatusOr<Grammar> Parse() {
    SkipSpace();
    while (i_ < t_.size()) {
      const size_t start = i_;
      std::string name = ParseName();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (t_.substr(i_, 3) != "::=")
        return Error(absl::StrCat("expected '::=' after '", name, "'"));
      i_ += 3;
      const int32_t rule = b_.Rule(name);
      if (b_.IsDefined(rule)) {
        i_ = start;
        return Error(absl::StrCat("rule '", name, "' is defined twice"));
      }
      absl::StatusOr<Expr> body = ParseAlternatives(/*depth=*/0);
      if (!body.ok()) return body.status();
      b_.Define(rule, *std::move(body));
      SkipSpace();
    }
    const int32_t root = b_.Rule("root");
    if (!b_.IsDefined(root)) return absl::InvalidArgumentError("EBNF: there is no 'root' rule");
    absl::StatusOr<Grammar> g = b_.Build(root);
    if (!g.ok()) return absl::InvalidArgumentError(absl::StrCat("EBNF: ", g.status().message()));
    return g;
  }

 private:
  absl::Status Error(std::string_view what) const {
    int line = 1, column = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) {
      if (t_[k] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("EBNF line ", line, " column ", column, ": ", std::string(what)));
  }

  void SkipSpace() {
    while (i_ < t_.size()) {
      if (std::isspace(static_cast<unsigned char>(t_[i_]))) {
        ++i_;
      } else if (t_[i_] == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string ParseName() {
    size_t start = i_;
    while (i_ < t_.size() && IsNameChar(t_[i_])) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  // True when the next thing is `name ::=` (the start of the next rule).
  bool AtRuleStart() {
    size_t save = i_;
    std::string name = ParseName();
    SkipSpace();
    bool result = !name.empty() && t_.substr(i_, 3) == "::=";
    i_ = save;
    return result;
  }

  absl::StatusOr<Expr> ParseAlternatives(int depth) {
    if (depth > 64) return Error("groups nested too deeply");
    std::vector<Expr> alternatives;
    while (true) {
      std::vector<Expr> items;
      while (true) {
        SkipSpace();
        if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')') break;
        if (depth == 0 && AtRuleStart()) break;
        absl::StatusOr<Expr> item = ParseRepeated(depth);
        if (!item.ok()) return item.status();
        items.push_back(*std::move(item));
      }
      alternatives.push_back(Expr::Sequence(std::move(items)));
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        continue;
      }
      break;
    }
    return alternatives.size() == 1 ? std::move(alternatives[0])
                                    : Expr::Choice(std::move(alternatives));
  }

  bool ParseInt(int* out) {
    size_t start = i_;
    int64_t v = 0;
    while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
      v = std::min<int64_t>(v * 10 + (t_[i_] - '0'), 1 << 30);
      ++i_;
    }
    *out = static_cast<int>(v);
    return i_ > start;
  }

  absl::StatusOr<Expr> ParseRepeated(int depth) {
    absl::StatusOr<Expr> item = ParsePrimary(depth);
    if (!item.ok()) return item;
    while (i_ < t_.size()) {
      const char c = t_[i_];
      int min, max;
      if (c == '*') {
        min = 0, max = -1;
      } else if (c == '+') {
        min = 1, max = -1;
      } else if (c == '?') {
        min = 0, max = 1;
      } else if (c == '{') {
        ++i_;
        SkipSpace();
        bool has_min = ParseInt(&min);
        if (!has_min) min = 0;
        SkipSpace();
        max = min;
        if (i_ < t_.size() && t_[i_] == ',') {
          ++i_;
          SkipSpace();
          if (!ParseInt(&max)) max = -1;
          SkipSpace();
        } else if (!has_min) {
          return Error("expected a number in '{...}'");
        }
        if (i_ >= t_.size() || t_[i_] != '}') return Error("expected '}'");
        if (max >= 0 && max < min) return Error("repetition {m,n} with n < m");
      } else {
        break;
      }
      ++i_;
      item = Expr::Repeat(*std::move(item), min, max);
    }
    return item;
  }

  // An escape after '\\' in a literal or class: the code point.
  absl::StatusOr<uint32_t> ParseEscape() {
    if (i_ >= t_.size()) return Error("unterminated escape");
    const char e = t_[i_++];
    int digits = 0;
    switch (e) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '0':
        return uint32_t{0};
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return static_cast<uint32_t>(e);
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      default:
        --i_;
        return Error(absl::StrCat("unknown escape \\", std::string(1, e)));
    }
    uint32_t cp = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_]))) {
        return Error(absl::StrCat("\\", std::string(1, e), " needs ", digits, " hex digits"));
      }
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(t_[i_++])));
      cp = cp * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
      return Error("code point out of range");
    return cp;
  }

  absl::StatusOr<uint32_t> ParseCodePoint() {
    if (t_[i_] == '\\') {
      ++i_;
      return ParseEscape();
    }
    uint32_t cp;
    if (!NextCodePoint(t_, &i_, &cp)) return Error("invalid UTF-8");
    return cp;
  }

  absl::StatusOr<Expr> ParsePrimary(int depth) {
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (true) {
        if (i_ >= t_.size() || t_[i_] == '\n') return Error("unterminated string literal");
        if (t_[i_] == '"') break;
        absl::StatusOr<uint32_t> cp = ParseCodePoint();
        if (!cp.ok()) return cp.status();
        AppendUtf8(*cp, &bytes);
      }
      ++i_;
      return Expr::Literal(bytes);
    }
    if (c == '[') {
      ++i_;
      bool negated = i_ < t_.size() && t_[i_] == '^';
      if (negated) ++i_;
      CodePointRanges ranges;
      while (true) {
        if (i_ >= t_.size()) return Error("unterminated character class");
        if (t_[i_] == ']') break;
        absl::StatusOr<uint32_t> lo = ParseCodePoint();
        if (!lo.ok()) return lo.status();
        uint32_t hi = *lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          absl::StatusOr<uint32_t> end = ParseCodePoint();
          if (!end.ok()) return end.status();
          if (*end < *lo) return Error("character range out of order");
          hi = *end;
        }
        ranges.push_back({*lo, hi});
      }
      ++i_;
      return Utf8Expr(negated ? ComplementRanges(ranges) : NormalizeRanges(ranges));
    }
    if (c == '.') {
      ++i_;
      return Utf8Expr({{0, kMaxCodePoint}});
    }
    if (c == '(') {
      ++i_;
      absl::StatusOr<Expr> inner = ParseAlternatives(depth + 1);
      if (!inner.ok()) return inner;
      SkipSpace();
      if (i_ >= t_.size() || t_[i_] != ')') return Error("expected ')'");
      ++i_;
      return inner;
    }
    if (IsNameChar(c)) return Expr::Ref(b_.Rule(ParseName()));
    return Error(absl::StrCat("unexpected '", std::string(1, c), "'"));
  }

  std::string_view t_;
  size_t i_ = 0;
  GrammarBuilder b_;
};

}  // namespace

absl::StatusOr<Grammar> EbnfGrammar(std::string_view text) { return EbnfParser(text).Parse(); }

}  // namespace lockstep::grammar

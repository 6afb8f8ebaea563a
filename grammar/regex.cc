#include "grammar/regex.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grammar/utf8_ranges.h"

namespace lockstep::grammar {
namespace {

const CodePointRanges kDigit = {{'0', '9'}};
const CodePointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodePointRanges kSpace = {
    {'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CodePointRanges kNotLineTerminator =
    ComplementRanges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});

// Code points as an expression: their UTF-8 bytes, or in JSON-string mode their JSON
// encoding.
Expr CharExpr(const CodePointRanges& ranges, RegexMode mode) {
  if (mode == RegexMode::kWholeText) return Utf8Expr(ranges);
  const CodePointRanges special = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  CodePointRanges plain;
  for (auto [lo, hi] : NormalizeRanges(ranges)) {
    for (auto [a, b] : ComplementRanges(special)) {
      if (std::max(lo, a) <= std::min(hi, b)) plain.push_back({std::max(lo, a), std::min(hi, b)});
    }
  }
  std::vector<Expr> choices;
  if (!plain.empty()) choices.push_back(Utf8Expr(plain));
  for (auto [lo, hi] : NormalizeRanges(ranges)) {
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x5C); ++c) {
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      const char* named = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\t' ? "\\t"
                          : c == '\r' ? "\\r"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : nullptr;
      if (named != nullptr) {
        choices.push_back(Expr::Literal(named));
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        choices.push_back(Expr::Literal(std::string("\\u00") + kHex[c >> 4] + kHex[c & 15]));
      }
    }
  }
  if (choices.empty()) return Expr::Bytes(ByteSet());
  return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, RegexMode mode) : p_(pattern), mode_(mode) {}

  absl::StatusOr<Expr> Parse() {
    std::vector<Expr> alternatives;
    while (true) {
      bool anchored_start = false, anchored_end = false;
      if (Peek('^')) {
        ++i_;
        anchored_start = true;
      }
      absl::StatusOr<Expr> seq = ParseSequence(/*top=*/true, &anchored_end);
      if (!seq.ok()) return seq.status();
      if (mode_ == RegexMode::kJsonString) {
        Expr any = Expr::Star(CharExpr({{0, kMaxCodePoint}}, mode_));
        std::vector<Expr> parts;
        if (!anchored_start) parts.push_back(any);
        parts.push_back(*std::move(seq));
        if (!anchored_end) parts.push_back(any);
        seq = Expr::Sequence(std::move(parts));
      }
      alternatives.push_back(*std::move(seq));
      if (i_ >= p_.size()) break;
      if (p_[i_] == ')') return Error("unmatched ')'");
      ++i_;  // '|'
    }
    return alternatives.size() == 1 ? std::move(alternatives[0])
                                    : Expr::Choice(std::move(alternatives));
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", std::string(what), " at offset ", i_,
                                                   " of \"", std::string(p_), "\""));
  }
  bool Peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  absl::StatusOr<Expr> ParseAlternation() {
    std::vector<Expr> alternatives;
    while (true) {
      absl::StatusOr<Expr> seq = ParseSequence(/*top=*/false, nullptr);
      if (!seq.ok()) return seq.status();
      alternatives.push_back(*std::move(seq));
      if (!Peek('|')) break;
      ++i_;
    }
    return alternatives.size() == 1 ? std::move(alternatives[0])
                                    : Expr::Choice(std::move(alternatives));
  }

  absl::StatusOr<Expr> ParseSequence(bool top, bool* anchored_end) {
    std::vector<Expr> items;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        if (!top || (i_ < p_.size() && p_[i_] != '|'))
          return Error("'$' is only supported at the end");
        *anchored_end = true;
        break;
      }
      if (p_[i_] == '^') return Error("'^' is only supported at the start");
      absl::StatusOr<Expr> atom = ParseQuantified();
      if (!atom.ok()) return atom.status();
      items.push_back(*std::move(atom));
    }
    return items.size() == 1 ? std::move(items[0]) : Expr::Sequence(std::move(items));
  }

  bool ParseInt(int* out) {
    size_t start = i_;
    int64_t v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = std::min<int64_t>(v * 10 + (p_[i_] - '0'), 1 << 30);
      ++i_;
    }
    *out = static_cast<int>(v);
    return i_ > start;
  }

  absl::StatusOr<Expr> ParseQuantified() {
    absl::StatusOr<Expr> atom = ParseAtom();
    if (!atom.ok()) return atom;
    while (i_ < p_.size()) {
      int min = 0, max = 0;
      const char c = p_[i_];
      if (c == '*') {
        min = 0, max = -1;
        ++i_;
      } else if (c == '+') {
        min = 1, max = -1;
        ++i_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++i_;
      } else if (c == '{') {
        ++i_;
        if (!ParseInt(&min)) return Error("'{' is not a quantifier");
        max = min;
        if (Peek(',')) {
          ++i_;
          max = -1;
          if (!Peek('}') && !ParseInt(&max)) return Error("bad quantifier");
        }
        if (!Peek('}')) return Error("unterminated quantifier");
        ++i_;
      } else {
        break;
      }
      if (Peek('?')) ++i_;  // lazy: the same strings
      if (max >= 0 && max < min) return Error("quantifier {m,n} with n < m");
      atom = Expr::Repeat(*std::move(atom), min, max);
    }
    return atom;
  }

  absl::StatusOr<Expr> ParseAtom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (Peek('?')) {
        ++i_;
        if (Peek(':')) {
          ++i_;
        } else if (Peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (i_ < p_.size() && p_[i_] != '>') ++i_;  // a named group
          if (!Peek('>')) return Error("unterminated group name");
          ++i_;
        } else {
          return Error("lookahead and lookbehind are not supported");
        }
      }
      absl::StatusOr<Expr> inner = ParseAlternation();
      if (!inner.ok()) return inner;
      if (!Peek(')')) return Error("missing ')'");
      ++i_;
      return inner;
    }
    if (c == '[') {
      absl::StatusOr<CodePointRanges> ranges = ParseClass();
      if (!ranges.ok()) return ranges.status();
      return CharExpr(*ranges, mode_);
    }
    if (c == '.') {
      ++i_;
      return CharExpr(kNotLineTerminator, mode_);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("nothing to repeat");
    if (c == ']' || c == '}') return Error(absl::StrCat("lone '", std::string(1, c), "'"));
    CodePointRanges ranges;
    absl::Status s = ParseChar(/*in_class=*/false, &ranges);
    if (!s.ok()) return s;
    return CharExpr(ranges, mode_);
  }

  // One character or escape (a class escape gives several ranges).
  absl::Status ParseChar(bool in_class, CodePointRanges* out) {
    if (p_[i_] != '\\') {
      uint32_t cp;
      if (!NextCodePoint(p_, &i_, &cp)) return Error("invalid UTF-8");
      out->push_back({cp, cp});
      return absl::OkStatus();
    }
    ++i_;
    if (i_ >= p_.size()) return Error("trailing '\\'");
    const char e = p_[i_++];
    auto one = [&](uint32_t cp) {
      out->push_back({cp, cp});
      return absl::OkStatus();
    };
    auto add = [&](const CodePointRanges& r) {
      out->insert(out->end(), r.begin(), r.end());
      return absl::OkStatus();
    };
    switch (e) {
      case 'd':
        return add(kDigit);
      case 'D':
        return add(ComplementRanges(kDigit));
      case 'w':
        return add(kWord);
      case 'W':
        return add(ComplementRanges(kWord));
      case 's':
        return add(kSpace);
      case 'S':
        return add(ComplementRanges(kSpace));
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 't':
        return one('\t');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case '0':
        return one(0);
      case 'b':
        if (in_class) return one('\b');
        return Error("word boundaries (\\b) are not supported");
      case 'B':
        return Error("word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        return Error("Unicode property escapes are not supported");
      case 'k':
        return Error("back references are not supported");
      case 'c': {
        if (i_ >= p_.size() || !std::isalpha(static_cast<unsigned char>(p_[i_])))
          return Error("bad \\c escape");
        return one(static_cast<uint32_t>(p_[i_++]) % 32);
      }
      case 'x':
      case 'u': {
        uint32_t cp = 0;
        int digits = e == 'x' ? 2 : 4;
        bool braced = e == 'u' && Peek('{');
        if (braced) ++i_;
        int n = 0;
        while (i_ < p_.size() && std::isxdigit(static_cast<unsigned char>(p_[i_])) &&
               (braced || n < digits)) {
          cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(p_[i_]))
                                                   ? p_[i_] - '0'
                                                   : (std::tolower(p_[i_]) - 'a' + 10));
          if (cp > kMaxCodePoint) return Error("code point out of range");
          ++i_, ++n;
        }
        if (braced) {
          if (!Peek('}') || n == 0) return Error("bad \\u{...} escape");
          ++i_;
        } else if (n != digits) {
          return Error(absl::StrCat("bad \\", std::string(1, e), " escape"));
        }
        return one(cp);
      }
      default:
        if (e >= '1' && e <= '9') return Error("back references are not supported");
        if (std::isalnum(static_cast<unsigned char>(e))) {
          return Error(absl::StrCat("unknown escape \\", std::string(1, e)));
        }
        return one(static_cast<uint8_t>(e));
    }
  }

  absl::StatusOr<CodePointRanges> ParseClass() {
    ++i_;  // '['
    bool negated = false;
    if (Peek('^')) {
      negated = true;
      ++i_;
    }
    CodePointRanges ranges;
    while (true) {
      if (i_ >= p_.size()) return Error("missing ']'");
      if (p_[i_] == ']') {
        ++i_;
        break;
      }
      CodePointRanges first;
      absl::Status s = ParseChar(/*in_class=*/true, &first);
      if (!s.ok()) return s;
      if (Peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        CodePointRanges last;
        s = ParseChar(/*in_class=*/true, &last);
        if (!s.ok()) return s;
        if (first.size() != 1 || last.size() != 1 || first[0].first != first[0].second ||
            last[0].first != last[0].second) {
          return Error("a class escape cannot bound a range");
        }
        if (last[0].first < first[0].first) return Error("range out of order");
        ranges.push_back({first[0].first, last[0].first});
      } else {
        ranges.insert(ranges.end(), first.begin(), first.end());
      }
    }
    return negated ? ComplementRanges(ranges) : NormalizeRanges(ranges);
  }

  std::string_view p_;
  RegexMode mode_;
  size_t i_ = 0;
};

}  // namespace

absl::StatusOr<Expr> RegexToExpr(std::string_view pattern, RegexMode mode) {
  return RegexParser(pattern, mode).Parse();
}

absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  absl::StatusOr<Expr> expr = RegexToExpr(pattern, RegexMode::kWholeText);
  if (!expr.ok()) return expr.status();
  GrammarBuilder b;
  const int32_t root = b.Rule("root");
  b.Define(root, *std::move(expr));
  return b.Build(root);
}

}  // namespace lockstep::grammar

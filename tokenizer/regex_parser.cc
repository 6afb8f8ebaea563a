// The parser of regex.h: pattern text to a regex_internal::Program.
#include <optional>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lockstep::tok::regex_internal {
namespace {

bool IsAsciiLetter(char32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

// Adds `cp` and, when case-insensitive, the code points that fold to the same letter.
void AddCaseless(char32_t lo, char32_t hi, bool fold, CharSet* set) {
  set->ranges.emplace_back(lo, hi);
  if (!fold) return;
  for (char32_t c = lo; c <= hi && c < 128; ++c) {
    if (!IsAsciiLetter(c)) continue;
    set->ranges.emplace_back(c ^ 0x20, c ^ 0x20);
    if ((c | 0x20) == 's') set->ranges.emplace_back(0x17F, 0x17F);    // LATIN SMALL LONG S
    if ((c | 0x20) == 'k') set->ranges.emplace_back(0x212A, 0x212A);  // KELVIN SIGN
  }
}

bool HasCase(char32_t cp) {
  return cp >= 128 && IsIn(cp, Bit(GeneralCategory::kLu) | Bit(GeneralCategory::kLl) |
                                   Bit(GeneralCategory::kLt));
}

class Parser {
 public:
  explicit Parser(std::string_view pattern) : pattern_(pattern) {
    for (size_t i = 0; i < pattern.size();) {
      offsets_.push_back(i);
      cps_.push_back(NextCodePoint(pattern, &i));
    }
    offsets_.push_back(pattern.size());
  }

  absl::StatusOr<Program> Run() {
    program_.groups.emplace_back();
    if (!ParseAlternation(0, /*fold=*/false)) return error_;
    if (pos_ < cps_.size()) {
      Fail("unmatched ')'");
      return error_;
    }
    for (CharSet& set : program_.sets) {
      for (char32_t c = 0; c < 128; ++c) {
        if (set.ContainsSlow(c)) set.ascii[c >> 6] |= uint64_t{1} << (c & 63);
      }
    }
    if (Nullable(program_.groups[0])) {
      return absl::InvalidArgumentError(fmt::format(
          "regex /{}/: a pattern that can match the empty string is not supported", pattern_));
    }
    return std::move(program_);
  }

 private:
  bool AtEnd() const { return pos_ >= cps_.size(); }
  char32_t Peek(size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0;
  }
  bool Accept(char32_t c) {
    if (AtEnd() || cps_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // Records the error; returns false so callers can `return Fail(...)`.
  bool Fail(std::string_view what) {
    const size_t at = offsets_[std::min(pos_, cps_.size())];
    error_ =
        absl::InvalidArgumentError(fmt::format("regex /{}/ at offset {}: {}", pattern_, at, what));
    return false;
  }
  bool Unsupported(std::string_view what) { return Fail(fmt::format("{} is not supported", what)); }

  // Parses branches into groups[index] until ')' or the end.
  bool ParseAlternation(int index, bool fold) {
    while (true) {
      Sequence seq;
      while (!AtEnd() && Peek() != '|' && Peek() != ')') {
        if (!ParseItem(fold, &seq)) return false;
      }
      program_.groups[index].branches.push_back(std::move(seq));
      if (!Accept('|')) return true;
    }
  }

  bool ParseItem(bool fold, Sequence* seq) {
    Item item;
    const char32_t c = Peek();
    if (c == '(') {
      ++pos_;
      item.kind = Item::Kind::kGroup;
      bool group_fold = fold;
      if (Accept('?')) {
        if (Accept(':')) {
        } else if (Peek() == 'i' && Peek(1) == ':') {
          pos_ += 2;
          group_fold = true;
        } else if (Accept('=')) {
          item.kind = Item::Kind::kLookahead;
        } else if (Accept('!')) {
          item.kind = Item::Kind::kNegativeLookahead;
        } else if (Peek() == '<') {
          return Unsupported("lookbehind or a named group '(?<'");
        } else {
          return Unsupported("this group syntax '(?'");
        }
      }
      item.index = static_cast<int>(program_.groups.size());
      program_.groups.emplace_back();
      if (!ParseAlternation(item.index, group_fold)) return false;
      if (!Accept(')')) return Fail("missing ')'");
    } else if (c == '[') {
      ++pos_;
      CharSet set;
      if (!ParseClass(fold, &set)) return false;
      item.index = AddSet(std::move(set));
    } else if (c == '\\') {
      ++pos_;
      CharSet set;
      if (!ParseEscape(fold, /*in_class=*/false, &set)) return false;
      item.index = AddSet(std::move(set));
    } else if (c == '.' || c == '^' || c == '$') {
      return Unsupported(fmt::format("'{}'", static_cast<char>(c)));
    } else if (c == '*' || c == '+' || c == '?') {
      return Fail("nothing to repeat");
    } else {
      ++pos_;
      if (fold && HasCase(c)) return Unsupported("case folding of non-ASCII letters");
      CharSet set;
      AddCaseless(c, c, fold, &set);
      item.index = AddSet(std::move(set));
    }
    if (!ParseQuantifier(&item)) return false;
    seq->items.push_back(item);
    return true;
  }

  bool ParseQuantifier(Item* item) {
    const char32_t c = Peek();
    if (c == '?') {
      item->min = 0, item->max = 1;
    } else if (c == '*') {
      item->min = 0, item->max = kUnbounded;
    } else if (c == '+') {
      item->min = 1, item->max = kUnbounded;
    } else if (c == '{') {
      size_t p = pos_ + 1;
      if (p < cps_.size() && cps_[p] == ',') return Unsupported("the interval '{,n}'");
      const std::optional<int> lo = Number(&p);
      if (!lo) return true;  // Oniguruma reads a '{' that starts no interval as a literal
      int hi = *lo;
      if (p < cps_.size() && cps_[p] == ',') {
        ++p;
        const std::optional<int> h = Number(&p);
        hi = h ? *h : kUnbounded;
      }
      if (p >= cps_.size() || cps_[p] != '}') return true;
      if (hi != kUnbounded && hi < *lo) return Fail("bad interval {n,m} with m < n");
      item->min = *lo, item->max = hi;
      pos_ = p;
    } else {
      return true;
    }
    ++pos_;
    if (item->kind == Item::Kind::kLookahead || item->kind == Item::Kind::kNegativeLookahead) {
      return Unsupported("a quantified lookahead");
    }
    if (Peek() == '?' || Peek() == '+') {
      return Unsupported("a lazy or possessive quantifier");
    }
    if (item->kind == Item::Kind::kGroup && item->max == kUnbounded &&
        Nullable(program_.groups[item->index])) {
      return Unsupported("an unbounded repeat of a group that can match empty");
    }
    return true;
  }

  std::optional<int> Number(size_t* p) const {
    int value = 0, digits = 0;
    while (*p < cps_.size() && cps_[*p] >= '0' && cps_[*p] <= '9' && digits < 6) {
      value = value * 10 + static_cast<int>(cps_[*p] - '0');
      ++*p, ++digits;
    }
    return digits > 0 ? std::optional<int>(value) : std::nullopt;
  }

  // After '['.
  bool ParseClass(bool fold, CharSet* set) {
    set->negated = Accept('^');
    bool first = true;
    while (true) {
      if (AtEnd()) return Fail("missing ']'");
      const char32_t c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        return true;
      }
      first = false;
      if (c == '[') return Unsupported("a nested class '['");
      if (c == '&' && Peek(1) == '&') return Unsupported("class intersection '&&'");
      std::optional<char32_t> lo;
      if (c == '\\') {
        ++pos_;
        CharSet escaped;
        if (!ParseEscape(fold, /*in_class=*/true, &escaped)) return false;
        if (IsSingle(escaped)) {
          lo = escaped.ranges[0].first;
        } else {
          Merge(escaped, set);
          continue;
        }
      } else {
        ++pos_;
        lo = c;
      }
      char32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < cps_.size()) {
        ++pos_;
        if (Peek() == '\\') {
          ++pos_;
          CharSet escaped;
          if (!ParseEscape(fold, /*in_class=*/true, &escaped)) return false;
          if (!IsSingle(escaped)) return Fail("a range must end in one character");
          hi = escaped.ranges[0].first;
        } else {
          hi = Peek();
          ++pos_;
        }
        if (hi < *lo) return Fail("an empty range");
      }
      if (fold && (HasCase(*lo) || HasCase(hi) || (*lo < 128 && hi >= 128))) {
        return Unsupported("case folding of non-ASCII letters");
      }
      AddCaseless(*lo, hi, fold, set);
    }
  }

  // A single literal escape comes back as one one-code-point range (folded later).
  static bool IsSingle(const CharSet& s) {
    return s.ranges.size() == 1 && s.ranges[0].first == s.ranges[0].second && !s.categories &&
           !s.not_categories && !s.white_space && !s.not_white_space && !s.negated;
  }

  static void Merge(const CharSet& from, CharSet* to) {
    to->ranges.insert(to->ranges.end(), from.ranges.begin(), from.ranges.end());
    to->categories |= from.categories;
    to->not_categories |= from.not_categories;
    to->white_space |= from.white_space;
    to->not_white_space |= from.not_white_space;
  }

  // After '\'. Outside classes, literal escapes are folded here.
  bool ParseEscape(bool fold, bool in_class, CharSet* set) {
    if (AtEnd()) return Fail("a trailing '\\'");
    const char32_t c = cps_[pos_++];
    char32_t literal;
    switch (c) {
      case 's':
        set->white_space = true;
        return true;
      case 'S':
        set->not_white_space = true;
        return true;
      case 'p':
      case 'P': {
        if (!Accept('{')) return Unsupported("a one-letter property \\p without braces");
        std::string name;
        while (!AtEnd() && Peek() != '}') AppendUtf8(cps_[pos_++], &name);
        if (!Accept('}')) return Fail("missing '}' after \\p{");
        bool negate = c == 'P';
        if (!name.empty() && name[0] == '^') negate = !negate, name.erase(0, 1);
        const CategoryMask mask = CategoryMaskByName(name);
        if (mask == 0) return Unsupported(fmt::format("the property \\p{{{}}}", name));
        (negate ? set->not_categories : set->categories) |= mask;
        return true;
      }
      case 'r':
        literal = '\r';
        break;
      case 'n':
        literal = '\n';
        break;
      case 't':
        literal = '\t';
        break;
      case 'f':
        literal = '\f';
        break;
      case 'v':
        literal = '\v';
        break;
      case 'x':
      case 'u': {
        std::optional<char32_t> value = Hex(c);
        if (!value) return Fail(fmt::format("a bad \\{} escape", static_cast<char>(c)));
        literal = *value;
        break;
      }
      default:
        if (c < 128 && !IsAsciiLetter(c) && !(c >= '0' && c <= '9')) {
          literal = c;  // escaped punctuation
          break;
        }
        return Unsupported(fmt::format("the escape '\\{}'", std::string(1, static_cast<char>(c))));
    }
    if (in_class) {
      set->ranges.emplace_back(literal, literal);
    } else {
      if (fold && HasCase(literal)) return Unsupported("case folding of non-ASCII letters");
      AddCaseless(literal, literal, fold, set);
    }
    return true;
  }

  // After \x or \u: \xHH, \x{H..}, \uHHHH.
  std::optional<char32_t> Hex(char32_t kind) {
    const auto digit = [](char32_t d) -> int {
      if (d >= '0' && d <= '9') return static_cast<int>(d - '0');
      if ((d | 0x20) >= 'a' && (d | 0x20) <= 'f') return static_cast<int>((d | 0x20) - 'a' + 10);
      return -1;
    };
    char32_t value = 0;
    if (kind == 'x' && Accept('{')) {
      int n = 0;
      while (!AtEnd() && digit(Peek()) >= 0 && n < 6) value = value * 16 + digit(cps_[pos_++]), ++n;
      if (n == 0 || !Accept('}') || value > 0x10FFFF) return std::nullopt;
      return value;
    }
    const int want = kind == 'x' ? 2 : 4;
    for (int i = 0; i < want; ++i) {
      if (AtEnd() || digit(Peek()) < 0) return std::nullopt;
      value = value * 16 + digit(cps_[pos_++]);
    }
    return value;
  }

  int AddSet(CharSet set) {
    program_.sets.push_back(std::move(set));
    return static_cast<int>(program_.sets.size()) - 1;
  }

  bool Nullable(const Alternation& alt) const {
    for (const Sequence& seq : alt.branches) {
      bool nullable = true;
      for (const Item& item : seq.items) {
        if (item.min == 0 || item.kind == Item::Kind::kLookahead ||
            item.kind == Item::Kind::kNegativeLookahead) {
          continue;
        }
        if (item.kind == Item::Kind::kGroup && Nullable(program_.groups[item.index])) continue;
        nullable = false;
        break;
      }
      if (nullable) return true;
    }
    return false;
  }

  std::string_view pattern_;
  std::vector<char32_t> cps_;
  std::vector<size_t> offsets_;
  size_t pos_ = 0;
  Program program_;
  absl::Status error_;
};

}  // namespace

bool CharSet::ContainsSlow(char32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) {
    if (cp >= lo && cp <= hi) {
      in = true;
      break;
    }
  }
  if (!in && (categories | not_categories) != 0) {
    const CategoryMask bit = Bit(CategoryOf(cp));
    in = (bit & categories) != 0 || (not_categories != 0 && (bit & not_categories) == 0);
  }
  if (!in && (white_space || not_white_space)) {
    const bool ws = IsWhiteSpace(cp);
    in = (white_space && ws) || (not_white_space && !ws);
  }
  return in != negated;
}

absl::StatusOr<Program> Parse(std::string_view pattern) { return Parser(pattern).Run(); }

}  // namespace lockstep::tok::regex_internal

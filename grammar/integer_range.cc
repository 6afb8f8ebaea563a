#include "grammar/integer_range.h"

#include <string>
#include <utility>
#include <vector>

namespace lockstep::grammar {
namespace {

Expr Digit(char lo, char hi) { return Expr::Bytes(ByteSet::Range(lo, hi)); }

// Digit strings of equal length from a to b (inclusive, a <= b).
Expr SameLength(const std::string& a, const std::string& b) {
  if (a.size() == 1) return Digit(a[0], b[0]);
  if (a.find_first_not_of('0') == std::string::npos &&
      b.find_first_not_of('9') == std::string::npos) {
    return Expr::Repeat(Digit('0', '9'), a.size(), a.size());  // keeps the recursion linear
  }
  const std::string a_rest = a.substr(1), b_rest = b.substr(1);
  if (a[0] == b[0]) return Expr::Sequence({Expr::Byte(a[0]), SameLength(a_rest, b_rest)});
  const size_t n = a.size() - 1;
  std::vector<Expr> choices;
  choices.push_back(Expr::Sequence({Expr::Byte(a[0]), SameLength(a_rest, std::string(n, '9'))}));
  if (a[0] + 1 <= b[0] - 1) {
    choices.push_back(
        Expr::Sequence({Digit(a[0] + 1, b[0] - 1), Expr::Repeat(Digit('0', '9'), n, n)}));
  }
  choices.push_back(Expr::Sequence({Expr::Byte(b[0]), SameLength(std::string(n, '0'), b_rest)}));
  return Expr::Choice(std::move(choices));
}

// Non-negative integers in [lo, hi].
Expr NonNegative(uint64_t lo, uint64_t hi) {
  std::vector<Expr> choices;
  std::string a = std::to_string(lo);
  const std::string b = std::to_string(hi);
  while (a.size() < b.size()) {
    choices.push_back(SameLength(a, std::string(a.size(), '9')));
    a = "1" + std::string(a.size(), '0');
  }
  choices.push_back(SameLength(a, b));
  return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
}

}  // namespace

Expr IntegerRangeExpr(int64_t lo, int64_t hi) {
  std::vector<Expr> choices;
  if (lo < 0) {
    // -m for m in [max(1, -hi), -lo].
    const uint64_t m_lo = hi < 0 ? static_cast<uint64_t>(-hi) : 1;
    choices.push_back(
        Expr::Sequence({Expr::Byte('-'), NonNegative(m_lo, static_cast<uint64_t>(-lo))}));
  }
  if (hi >= 0) choices.push_back(NonNegative(lo < 0 ? 0 : lo, hi));
  return choices.size() == 1 ? std::move(choices[0]) : Expr::Choice(std::move(choices));
}

}  // namespace lockstep::grammar
